"""Golden native Responses streams under heal_arguments/coerce_arguments (issue 25): what a
client gets, byte for byte, for a server's own stream whose calls the proxy heals, coerces, or
leaves as they came. The cases (tests/core/arguments/golden/cases.json, with the repairs each
records) are replayed whole, a byte at a time and at random cuts; ``<case>.in.sse`` is the
upstream's body, ``<case>.out.sse`` the client's. Both are written only with UPDATE_GOLDEN=1
(the inputs from the cases' builders below), and reviewed as diffs. A case marked
``as_without_fixes`` (a cut, a heal that misfits) is also the output without heal and coerce."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proxy.core.events import FinishReason
from proxy.core.options import UpstreamOptions
from tests.core.arguments.responses_streams import OFF, call, every_cut, payloads, stream
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check

GOLDEN = Path(__file__).parent / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
SCHEMA = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"],
}
REQUEST = {
    "model": "m",
    "input": "go",
    "tools": [
        {"type": "function", "name": n, "parameters": SCHEMA} for n in ("get_weather", "get_time")
    ],
}
ALMOST = "{'location': 'Paris', 'days': 2,}"


def _two(first: str, second: str, finish: FinishReason = FinishReason.TOOL_CALLS) -> bytes:
    return stream(
        "Let me check.",
        call(0, "get_weather", first[:9], first[9:]),
        call(1, "get_time", second[:4], second[4:]),
        finish=finish,
    )


BUILDERS: dict[str, Callable[[], bytes]] = {
    "healed-two-calls": lambda: _two(ALMOST, "{'location': 'Oslo', 'days': 3, }"),
    "coerced-string-for-integer": lambda: _two(
        '{"location": "Paris"}', '{"location": "Oslo", "days": "3"}'
    ),
    "cut-by-max-output-tokens": lambda: _two(ALMOST, "{'location': 'Os", FinishReason.LENGTH),
    "heal-misfits-the-schema": lambda: _two("{'location': ['Paris'],}", '{"location": "Oslo"}'),
    "llamacpp-healed": lambda: v.sse(v.llamacpp(payloads(_two(ALMOST, ALMOST)))),
    "text-after-the-call": lambda: stream(
        call(0, "get_weather", ALMOST),
        "It is sunny.",
        ("reasoning", "Then the time."),
        call(1, "get_time", '{"location": "Paris"}'),
    ),
}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_native_responses_golden(case: dict[str, Any]) -> None:
    source, expected = GOLDEN / f"{case['name']}.in.sse", GOLDEN / f"{case['name']}.out.sse"
    if UPDATE:
        source.write_bytes(BUILDERS[case["name"]]())
    options = UpstreamOptions(**case["options"])
    out, repairs = every_cut(source.read_bytes(), REQUEST, options)
    if UPDATE:
        expected.write_bytes(out)
    assert expected.is_file(), f"no {expected.name}: run with UPDATE_GOLDEN=1 and review the diff"
    assert out == expected.read_bytes()
    assert dict(repairs) == case["repairs"]
    if case["as_without_fixes"]:  # a cut, or a fix that does not fit: as without healing
        assert (out, repairs) == every_cut(source.read_bytes(), REQUEST, OFF)
    checked = check(out)  # the canonical stream's rules
    assert [c["arguments"] for c in checked.calls] == case["arguments"]


def test_every_case_has_a_builder() -> None:
    assert [c["name"] for c in CASES] == list(BUILDERS)
