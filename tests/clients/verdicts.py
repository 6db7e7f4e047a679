"""Whether what a client reconstructed is what the case expects, and if not, why."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.clients.cases import Case, ExpectedCall
from tests.clients.drivers import Call, Outcome


@dataclass(frozen=True)
class Verdict:
    right: bool
    raised: bool
    reasons: tuple[str, ...]

    @property
    def label(self) -> str:
        if self.right:
            return "ok"
        return "ERROR" if self.raised else "WRONG"


def judge(case: Case, outcome: Outcome) -> Verdict:
    expect = case.expect
    reasons: list[str] = []
    if expect.outcome == "error":
        if outcome.error is None:
            reasons.append("no error raised")
        elif expect.error_contains and expect.error_contains not in outcome.error:
            reasons.append(f"error does not say {expect.error_contains!r}: {outcome.error}")
    elif expect.outcome == "complete":
        if outcome.error is not None:
            reasons.append(f"raised {outcome.error}")
        reasons += outcome.problems
        if outcome.finish_reason != expect.finish_reason:
            reasons.append(
                f"finish_reason {outcome.finish_reason!r}, expected {expect.finish_reason!r}"
            )
    # Whatever the outcome, what arrived must be kept.
    if outcome.content != expect.content:
        reasons.append(f"content {outcome.content!r}, expected {expect.content!r}")
    reasons += _call_reasons(outcome.calls, expect.calls)
    return Verdict(not reasons, outcome.error is not None, tuple(reasons))


def _call_reasons(got: tuple[Call, ...], expected: tuple[ExpectedCall, ...]) -> list[str]:
    if len(got) != len(expected):
        return [f"{len(got)} calls {[c.name for c in got]}, expected {len(expected)}"]
    reasons = []
    ids = [c.id for c in got]
    if len(set(ids)) != len(ids):
        reasons.append(f"ids not unique: {ids}")
    for i, (call, want) in enumerate(zip(got, expected, strict=True)):
        if call.name != want.name:
            reasons.append(f"call {i}: name {call.name!r}, expected {want.name!r}")
        if want.id is not None and call.id != want.id:
            reasons.append(f"call {i}: id {call.id!r}, expected the upstream's {want.id!r}")
        if not (isinstance(call.id, str) and call.id):
            reasons.append(f"call {i}: no id ({call.id!r})")
        if want.arguments_text is not None:
            # Text that is not JSON: a client that hands out text must hand out exactly it; one
            # that parses may refuse the call or repair it its own way.
            if isinstance(call.arguments, str) and call.arguments != want.arguments_text:
                reasons.append(f"call {i}: arguments {call.arguments!r}, expected the upstream's")
            continue
        if call.invalid:
            reasons.append(f"call {i}: the client refused it: {call.invalid}")
        arguments, problem = _parsed(call.arguments)
        if problem:
            reasons.append(f"call {i}: {problem}")
        elif arguments != want.arguments:
            reasons.append(f"call {i}: arguments {arguments!r}, expected {want.arguments!r}")
    return reasons


def _parsed(arguments: Any) -> tuple[Any, str | None]:
    if isinstance(arguments, dict):
        return arguments, None
    if not isinstance(arguments, str):
        return None, f"arguments {arguments!r} are neither JSON text nor an object"
    try:
        return json.loads(arguments), None
    except ValueError:
        return None, f"arguments {arguments!r} are not valid JSON"
