"""``extract_from_reasoning``: markup in reasoning text, for every dialect, none, or (``auto``,
the default) the dialects whose models write their calls in their reasoning (MiniMax, Kimi K2)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from proxy.cli import main
from proxy.core.errors import ConfigError
from proxy.core.markup import DIALECTS, check_names, reasoning_names
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, normalize_completion
from proxy.settings import load_settings
from tests.support.normalizer import counting_ids, run
from tests.support.strict_checker import check, reconstruct

ENVELOPE = {"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1, "model": "m"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
        },
    },
}
TOOLS = {"tools": [WEATHER]}
ALL = check_names(["auto"])
MINIMAX = (
    '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="location">Paris'
    '</parameter>\n<parameter name="days">2</parameter>\n</invoke>\n</minimax:tool_call>'
)
HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'


def event(delta: Mapping[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({**ENVELOPE, "choices": [choice]}).encode() + b"\n\n"


def reasoning_stream(reasoning: str) -> bytes:
    """The reasoning streamed a few characters per chunk, as a server with a reasoning parser
    sends MiniMax's ``<think>`` text."""
    pieces = [reasoning[i : i + 7] for i in range(0, len(reasoning), 7)]
    deltas = [{"role": "assistant", "content": None}]
    deltas += [{"reasoning_content": piece} for piece in ["Let me look it up.\n", *pieces]]
    return b"".join(map(event, deltas)) + event({}, "stop") + b"data: [DONE]\n\n"


def normalize(body: bytes, setting: object):
    options = UpstreamOptions(dialects=ALL, extract_from_reasoning=setting)  # type: ignore[arg-type]
    return run(body, options=options, request=RequestInfo.from_body(TOOLS))


def test_auto_is_the_default_and_names_the_dialects_that_write_calls_in_reasoning():
    assert UpstreamOptions().extract_from_reasoning == "auto"
    assert reasoning_names(ALL, "auto") == ("minimax_m2", "kimi_k2")
    assert reasoning_names(ALL, True) == ALL
    assert reasoning_names(ALL, False) == ()
    assert reasoning_names(("hermes",), "auto") == ()
    assert all(DIALECTS[name].in_reasoning for name in reasoning_names(ALL, "auto"))


@pytest.mark.parametrize("setting", ["auto", True])
def test_a_minimax_call_in_the_reasoning_becomes_a_call(setting):
    out, n = normalize(reasoning_stream(MINIMAX), setting)
    assert check(out, form="S1") == []
    seen = reconstruct(out).choices[0]
    assert "".join(seen.reasoning) == "Let me look it up.\n"
    assert [(c.name, json.loads(c.text)) for c in seen.calls] == [
        ("get_weather", {"location": "Paris", "days": 2})
    ]
    assert seen.finish_reason == "tool_calls"
    assert n.repairs["markup-in-content:minimax_m2"] == 1


def test_false_leaves_the_reasoning_alone():
    body = reasoning_stream(MINIMAX)
    assert normalize(body, False)[0] == body


def test_auto_leaves_markup_of_the_other_dialects_in_the_reasoning():
    """A model that rehearses the format while it thinks must not have it run; only the
    dialects known to put their real calls there are looked for."""
    body = reasoning_stream(HERMES)
    assert normalize(body, "auto")[0] == body
    out, _ = normalize(body, True)
    assert [c.name for c in reconstruct(out).choices[0].calls] == ["get_weather"]


@pytest.mark.parametrize(("setting", "found"), [("auto", 1), (True, 2), (False, 0)])
def test_a_whole_message_follows_the_same_setting(setting, found):
    message = {"role": "assistant", "content": None, "reasoning_content": MINIMAX + HERMES}
    body = json.dumps(
        {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}
    ).encode()
    options = UpstreamOptions(dialects=ALL, extract_from_reasoning=setting)
    out, _ = normalize_completion(
        body, options, RequestInfo.from_body(TOOLS), new_id=counting_ids()
    )
    calls = json.loads(out)["choices"][0]["message"].get("tool_calls") or []
    assert len(calls) == found


@pytest.mark.parametrize(
    ("value", "expected"), [(None, "auto"), ('"auto"', "auto"), ("true", True), ("false", False)]
)
def test_the_setting_takes_true_false_and_auto(tmp_path: Path, value, expected):
    line = "" if value is None else f"extract_from_reasoning = {value}\n"
    path = tmp_path / "proxy.toml"
    path.write_text(f'[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:1"\n{line}')
    assert load_settings(path).upstreams[0].extract_from_reasoning == expected


def test_the_setting_refuses_other_words(tmp_path: Path):
    path = tmp_path / "proxy.toml"
    path.write_text(
        '[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:1"\nextract_from_reasoning = "sometimes"\n'
    )
    with pytest.raises(ConfigError, match=r"upstreams\[0\]\.extract_from_reasoning"):
        load_settings(path)


@pytest.mark.parametrize(
    ("flag", "found"),
    [([], 1), (["--extract-from-reasoning"], 1), (["--no-extract-from-reasoning"], 0)],
)
def test_fix_takes_the_setting_too(tmp_path: Path, capsysbinary, flag, found):
    capture = tmp_path / "capture.sse"
    capture.write_bytes(reasoning_stream(MINIMAX))
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"model": "m", "stream": True, **TOOLS}))
    assert main(["fix", str(capture), "--request", str(request), *flag]) == 0
    out = capsysbinary.readouterr().out
    assert len(reconstruct(out).choices[0].calls) == found
