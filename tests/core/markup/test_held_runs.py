"""Text inside a held call's JSON string is taken without the parser's round (``takes_run``,
proxy/core/markup/block.py), exactly as the parser would take it.

Since issue 24 item 4 a call written as markup is held until its markup is complete, so most
of a long call's text is fed while nothing comes out. The blocks whose arguments are JSON
take a run of ordinary string characters straight into the held call; these tests hold the
segments, one by one and unmerged, and what the extractor holds after every feed, to those
of the same extractor with the shortcut refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment
from proxy.core.markup.block import BlockParser, Fork
from proxy.core.markup.hermes import HermesBlock
from proxy.core.markup.jsonscan import JsonBlock
from tests.core.markup.examples import SAMPLES
from tests.core.markup.helpers import TOOLS, cut, tokens

OPENING = '\n{"name": "get_weather", "arguments": {"city": "'


def feeds(chunks: list[str], name: str) -> list[tuple[list[Segment], int]]:
    extractor = build_extractor([name], TOOLS)
    assert extractor is not None
    out = [(extractor.feed(chunk), extractor.held) for chunk in chunks]
    return [*out, (extractor.close(), extractor.held)]


def refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for kind in (BlockParser, JsonBlock, Fork):
        monkeypatch.setattr(kind, "takes_run", lambda self, text: False)


@pytest.mark.parametrize("name", SAMPLES)
def test_a_tokenized_sample_gives_the_same_segments_and_holds_the_same_with_runs_refused(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = tokens(SAMPLES[name])
    taken = feeds(chunks, name)
    refused(monkeypatch)
    assert taken == feeds(chunks, name)


@pytest.mark.parametrize("name", SAMPLES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_sample_cut_anywhere_gives_the_same_segments_with_runs_refused(
    name: str, data: st.DataObject
) -> None:
    chunks = cut(data, SAMPLES[name])
    taken = feeds(chunks, name)
    with pytest.MonkeyPatch.context() as monkeypatch:
        refused(monkeypatch)
        assert taken == feeds(chunks, name)


def test_a_hermes_block_takes_string_characters_of_the_arguments_and_nothing_else() -> None:
    block = HermesBlock("<tool_call>")
    assert block.feed(OPENING).segments == []
    assert block.takes_run("Par")
    assert block.takes_run("is, France")
    assert not block.takes_run('"')  # the string's end: the parser's to read
    assert not block.takes_run("a\\n")  # an escape
    assert not block.takes_run("")
    step = block.feed('"}}\n</tool_call>')
    assert step.segments == [
        CallOpen("get_weather"),
        CallArgs('{"city": "'),
        CallArgs("Par"),
        CallArgs("is, France"),
        CallArgs('"}'),
        CallClose(),
    ]


def test_nothing_is_taken_before_the_call_is_named_or_outside_its_arguments() -> None:
    block = HermesBlock("<tool_call>")
    block.feed('\n{"na')
    assert not block.takes_run("me")  # a key being read, before the call opened
    block = HermesBlock("<tool_call>")
    block.feed('\n{"arguments": {"city": "')
    assert not block.takes_run("Paris")  # arguments before the name wait for it
