"""The registry: names, "auto", and the extractor it builds."""

from __future__ import annotations

import pytest

from proxy.core.errors import ConfigError
from proxy.core.markup import DIALECTS, build_extractor, check_names
from proxy.core.markup.base import CallOpen, Text
from tests.core.markup.examples import SAMPLES
from tests.core.markup.helpers import TOOLS, calls, run, tokens


def test_every_dialect_is_registered_with_a_sample():
    assert set(DIALECTS) == set(SAMPLES)
    assert all(name == cls.name for name, cls in DIALECTS.items())


def test_auto_means_all_and_unknown_names_list_the_known_ones():
    assert check_names(["auto"]) == tuple(DIALECTS)
    with pytest.raises(ConfigError, match=r"known: .*hermes.*auto"):
        check_names(["hermes", "klingon"])


def test_no_dialect_builds_no_extractor():
    assert build_extractor([], TOOLS) is None


@pytest.mark.parametrize("name", SAMPLES)
def test_auto_recognises_every_dialect(name):
    assert calls(run([SAMPLES[name]], ["auto"]))


@pytest.mark.parametrize("name", SAMPLES)
def test_a_dialect_not_enabled_leaves_its_markup_alone(name):
    others = [other for other in DIALECTS if other != name and other != "hermes"]
    sample = SAMPLES[name]
    if name in ("qwen3_coder", "glm"):  # they share <tool_call> with hermes
        others.remove("qwen3_coder" if name == "glm" else "glm")
    if name == "seed_oss":  # its calls inside the wrapper are qwen3_coder's
        others.remove("qwen3_coder")
    assert run([sample], others) == [Text(sample)]


def test_tools_that_are_not_function_objects_do_not_break_the_extractor():
    junk = ["get_weather", {"type": "function"}, {"function": {"name": 3}}, None]
    content = '[get_weather(city="Paris")]'
    assert run([content], ["pythonic"], tools=junk) == [Text(content)]


@pytest.mark.parametrize("name", SAMPLES)
def test_auto_names_the_dialect_that_opened_the_call(name):
    """Hermes, qwen3_coder and glm share <tool_call>: the one that took the block is named."""
    extractor = build_extractor(["auto"], TOOLS)
    assert extractor is not None
    assert extractor.dialect is None
    seen: list[str | None] = []
    for token in [*tokens(SAMPLES[name]), None]:
        segments = extractor.close() if token is None else extractor.feed(token)
        if any(isinstance(segment, CallOpen) for segment in segments):
            seen.append(extractor.dialect)
    assert seen
    assert set(seen) == {name}


def test_the_dialect_follows_the_most_recent_call():
    extractor = build_extractor(["auto"], TOOLS)
    assert extractor is not None
    opened = []
    for sample in (SAMPLES["qwen3_coder"], " then ", SAMPLES["kimi_k2"], SAMPLES["glm"]):
        segments = extractor.feed(sample)
        opened += [extractor.dialect for s in segments if isinstance(s, CallOpen)]
    assert opened == ["qwen3_coder", "kimi_k2", "glm"]
