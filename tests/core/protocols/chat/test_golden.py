"""Golden streams: every recorded upstream stream and every quirk Q1-Q31, in both output forms.

Each case in tests/golden/cases.json names an upstream body (``<case>.in.sse``), the request it
answers (requests.json), the markup dialects on (``dialects``, none when absent), whether the
upstream's response ended cleanly, the repair kinds the
normalizer must record and what a client must reconstruct (``expect``: per choice the calls
with name, id (null: synthesized) and arguments as a JSON value, or ``arguments_text`` when
they are not valid JSON; the text; the finish reason). The client-suite tests replay the same
cases to real client libraries and check the same ``expect``.

The expected client bytes are ``<case>.out.sse`` (S1) and ``<case>.s2.out.sse`` (S2). They are
written only with UPDATE_GOLDEN=1, and reviewed as diffs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo
from proxy.core.repairs import DETECTED_ONLY
from tests.support import strict_checker
from tests.support.normalizer import bytewise, eventwise, random_cuts, run

GOLDEN = Path(__file__).parents[3] / "golden"
FIXTURES = Path(__file__).parents[3] / "fixtures" / "upstream"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text(encoding="utf-8"))
FORMS = {"S1": ".out.sse", "S2": ".s2.out.sse"}
SYNTHESIZED_ID = re.compile(r"[A-Za-z0-9]{9}")
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def normalize(case: dict[str, Any], form: str, pieces: list[bytes] | bytes | None = None):
    body = pieces if pieces is not None else (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    return run(
        body,
        options=UpstreamOptions(coalesce=form == "S2", dialects=tuple(case.get("dialects", ()))),
        request=RequestInfo.from_body(REQUESTS[case["request"]]),
        complete=case["complete"],
    )


def expected_path(case: dict[str, Any], form: str) -> Path:
    name: str = case["name"]
    return GOLDEN / (name + FORMS[form])


cases = pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
forms = pytest.mark.parametrize("form", list(FORMS))


def test_cases_are_described():
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert case["note"], case["name"]
        assert case["source"], case["name"]
        assert case["request"] in REQUESTS, case["name"]
        assert (GOLDEN / f"{case['name']}.in.sse").is_file(), case["name"]


def test_every_quirk_up_to_q31_has_a_case():
    covered = {q for case in CASES for q in case["quirks"]}
    assert {f"Q{n}" for n in range(1, 32)} <= covered


def test_every_recording_has_a_case():
    recorded = {p.name for p in FIXTURES.glob("*.sse")}
    used = {
        case["source"].split("tests/fixtures/upstream/")[1].split(" ")[0]
        for case in CASES
        if case["source"].startswith("recorded:")
    }
    assert recorded == used
    for case in CASES:
        if case["source"].startswith("recorded:"):
            name = case["source"].split("tests/fixtures/upstream/")[1].split(" ")[0]
            assert (GOLDEN / f"{case['name']}.in.sse").read_bytes() == (
                FIXTURES / name
            ).read_bytes()


@cases
@forms
def test_golden_output(case, form):
    out, _ = normalize(case, form)
    path = expected_path(case, form)
    if UPDATE:
        path.write_bytes(out)
    assert path.is_file(), f"no {path.name}: run with UPDATE_GOLDEN=1 and review the diff"
    assert out == path.read_bytes()


@cases
@forms
def test_golden_output_however_the_upstream_bytes_are_cut(case, form):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    whole, _ = normalize(case, form)
    assert normalize(case, form, bytewise(body))[0] == whole
    for group in (1, 2, 5):  # reads of whole events take the rewriter's whole-read path
        assert normalize(case, form, eventwise(body, group))[0] == whole, group
    for pieces in random_cuts(body, case["name"]):
        assert normalize(case, form, pieces)[0] == whole


@cases
@forms
def test_golden_output_keeps_the_strict_rules(case, form):
    out, _ = normalize(case, form)
    problems = strict_checker.check(out, form=form, complete=case["complete"])
    if case["strict"]:
        assert problems == []
    else:
        # the case documents why it cannot be strict; make sure that is the only reason
        assert problems, "a case marked not strict passes the checker: mark it strict"
        assert all("rule 10" in p for p in problems), problems


@cases
@forms
def test_golden_client_view(case, form):
    out, _ = normalize(case, form)
    seen = strict_checker.reconstruct(out)
    assert sorted(seen.choices) == [e["index"] for e in case["expect"]]
    for expect in case["expect"]:
        choice = seen.choices[expect["index"]]
        assert "".join(choice.content) == expect["content"]
        if "reasoning" in expect:
            assert "".join(choice.reasoning) == expect["reasoning"]
        assert choice.finish_reason == expect["finish_reason"]
        assert len(choice.calls) == len(expect["calls"])
        for got, want in zip(choice.calls, expect["calls"], strict=True):
            assert got.name == want["name"]
            if want["id"] is None:
                assert SYNTHESIZED_ID.fullmatch(got.id), got.id
            else:
                assert got.id == want["id"]
            if "arguments" in want:
                assert json.loads(got.text) == want["arguments"]
            else:
                assert got.text == want["arguments_text"]
        if "error" in expect:
            assert seen.errors == [expect["error"]]
    ids = [c.id for choice in seen.choices.values() for c in choice.calls]
    assert len(ids) == len(set(ids))
    # after an error the proxy adds no [DONE]; one the upstream sent passes as it came
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    assert seen.done == (case["complete"] and (not seen.errors or b"data: [DONE]" in body))


@cases
def test_golden_repairs(case):
    _, s1 = normalize(case, "S1")
    assert sorted(s1.repairs) == case["repairs"]
    # S2 sends a call only when it is whole: it has no opening delta to split and no text
    # to move out of a tool-call delta
    _, s2 = normalize(case, "S2")
    assert set(s2.repairs) <= set(s1.repairs)
    assert set(s1.repairs) - set(s2.repairs) <= {"args-in-first-delta", "content-beside-tool-calls"}


@cases
@forms
def test_golden_normalizing_twice_changes_nothing(case, form):
    out, _ = normalize(case, form)
    again, normalizer = normalize(case, form, out)
    assert again == out
    assert set(normalizer.repairs) <= DETECTED_ONLY | {"name-missing"}


@cases
def test_golden_cases_without_repairs_pass_byte_for_byte(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    out, _ = normalize(case, "S1")
    assert (out == body) == (set(case["repairs"]) <= DETECTED_ONLY)
