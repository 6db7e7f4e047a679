"""The cases of the client matrix: an upstream response to replay and what a client must get.

Two sources, both read at collection time, so a new case is a new row of the matrix without
any code change:

* `cases/<name>.toml`: this suite's own cases (the client study's cases a..n, leaked markup,
  non-streaming bodies, a refused request). Each names the body to replay (an `.sse` or `.json`
  beside it, or a recording under tests/fixtures/upstream/) or gives `leaked` text that the
  upstream streams as content, one token per chunk.
* tests/golden/cases.json: the normalizer's golden cases, whose `expect` says what a client must
  reconstruct; `unaided.toml` records which clients each of them breaks without the proxy.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

HERE = Path(__file__).parent
CASES_DIR = HERE / "cases"
TOOLS_FILE = HERE / "tools.toml"
GOLDEN_DIR = HERE.parent / "golden"
UNAIDED_FILE = HERE / "unaided.toml"

PROMPT = "What is the weather in Paris?"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectedCall(_Strict):
    name: str
    # None: the upstream sent no id, so any non-empty id the proxy makes up is right.
    id: str | None = None
    # The arguments as a JSON value, or (when the upstream's text is not valid JSON and no one
    # can repair it) that text.
    arguments: Any = None
    arguments_text: str | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ExpectedCall:
        if (self.arguments is None) == (self.arguments_text is None):
            raise ValueError("give exactly one of arguments and arguments_text")
        return self


class Expected(_Strict):
    """What a client must reconstruct.

    complete: everything is checked (calls, content, finish_reason) and the client must not
        raise.
    truncated: the upstream stopped early; the client may raise, but the calls and content that
        did arrive must be kept.
    error: the upstream reported an error; the client must raise one carrying `error_contains`,
        and keep the content and calls that came before it.
    """

    outcome: Literal["complete", "truncated", "error"] = "complete"
    content: str = ""
    finish_reason: str | None = None
    calls: tuple[ExpectedCall, ...] = ()
    error_contains: str | None = None


@dataclass(frozen=True)
class Case:
    name: str
    about: str
    body: bytes
    stream: bool
    status: int
    content_type: str
    tools: tuple[dict[str, Any], ...]
    tool_choice: Any
    # "dropped": the upstream's connection breaks after the body instead of ending cleanly.
    ends: Literal["clean", "dropped"]
    # How many choices the response has (n); a client is judged on choice 0.
    choices: int
    expect: Expected
    # The clients this case's shape breaks without the proxy (None: not recorded).
    wrong_unaided: frozenset[str] | None
    origin: Path

    def request(self, model: str) -> dict[str, Any]:
        """The request body a client sends for this case (the replayer finds the case by model)."""
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": self.stream,
        }
        if self.tools:
            body["tools"] = list(self.tools)
        if self.tool_choice is not None:
            body["tool_choice"] = self.tool_choice
        if self.choices > 1:
            body["n"] = self.choices
        return body


def _tool(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **spec}}


def _tool_catalog() -> dict[str, dict[str, Any]]:
    with TOOLS_FILE.open("rb") as f:
        return {name: _tool(name, spec) for name, spec in tomllib.load(f).items()}


# -- this suite's case files -------------------------------------------------------------------

_TOKEN = re.compile(r"\s+|\w{1,4}|[^\w\s]")


def leaked_stream(text: str, finish_reason: str = "stop") -> bytes:
    """A chat completion stream whose content is `text`, cut as a tokenizer would."""
    envelope = {"id": "chatcmpl-leak", "object": "chat.completion.chunk", "created": 1767225600}
    deltas = [{"role": "assistant", "content": ""}] + [
        {"content": token} for token in _TOKEN.findall(text)
    ]
    assert "".join(d["content"] for d in deltas) == text
    chunks = [
        {**envelope, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append(
        {**envelope, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]}
    )
    events = [b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n" for c in chunks]
    return b"".join(events) + b"data: [DONE]\n\n"


class _CaseFile(_Strict):
    about: str
    body: str | None = None
    leaked: str | None = None
    tools: tuple[str, ...] = ()
    tool_choice: Any = None
    stream: bool = True
    status: int = 200
    content_type: str | None = None
    wrong_unaided: frozenset[str] | None = None
    expect: Expected

    @model_validator(mode="after")
    def _one_body(self) -> _CaseFile:
        if (self.body is None) == (self.leaked is None):
            raise ValueError("give exactly one of body and leaked")
        return self


def case_files(directory: Path = CASES_DIR) -> Iterator[Case]:
    catalog = _tool_catalog()
    for path in sorted(directory.glob("*.toml")):
        with path.open("rb") as f:
            spec = _CaseFile.model_validate(tomllib.load(f))
        unknown = [t for t in spec.tools if t not in catalog]
        if unknown:
            raise ValueError(f"{path}: tools {unknown} are not in {TOOLS_FILE.name}")
        if spec.body is not None:
            body = (path.parent / spec.body).read_bytes()
        else:
            body = leaked_stream(spec.leaked or "")
        yield Case(
            name=path.stem,
            about=spec.about,
            body=body,
            stream=spec.stream,
            status=spec.status,
            content_type=spec.content_type
            or ("text/event-stream" if spec.stream else "application/json"),
            tools=tuple(catalog[t] for t in spec.tools),
            tool_choice=spec.tool_choice,
            ends="clean",
            choices=1,
            expect=spec.expect,
            wrong_unaided=spec.wrong_unaided,
            origin=path,
        )


# -- the normalizer's golden cases -------------------------------------------------------------


def golden_cases(directory: Path = GOLDEN_DIR) -> Iterator[Case]:
    index = directory / "cases.json"
    if not index.is_file():
        return
    goldens = json.loads(index.read_text(encoding="utf-8"))
    requests = json.loads((directory / "requests.json").read_text(encoding="utf-8"))
    with UNAIDED_FILE.open("rb") as f:
        unaided: dict[str, list[str]] = tomllib.load(f)
    stale = sorted(set(unaided) - {golden["name"] for golden in goldens})
    if stale:
        raise ValueError(f"{UNAIDED_FILE.name} names cases that {index} lacks: {stale}")
    for golden in goldens:
        request = requests[golden["request"]]
        first = next(e for e in golden["expect"] if e["index"] == 0)
        calls = tuple(ExpectedCall.model_validate(call) for call in first["calls"])
        yield Case(
            name=golden["name"],
            about=golden["note"],
            body=(directory / f"{golden['name']}.in.sse").read_bytes(),
            stream=request.get("stream", True),
            status=200,
            content_type="text/event-stream",
            tools=_tools_for(request.get("tools", []), calls),
            tool_choice=request.get("tool_choice"),
            ends="clean" if golden["complete"] else "dropped",
            choices=len(golden["expect"]),
            expect=_golden_expect(golden, first, calls),
            wrong_unaided=frozenset(unaided[golden["name"]]) if golden["name"] in unaided else None,
            origin=index,
        )


def _tools_for(declared: list[dict[str, Any]], calls: tuple[ExpectedCall, ...]) -> tuple[Any, ...]:
    """The request's tools, plus an open schema for a called name the request did not declare.

    Some golden streams are recordings whose tool names differ from the request's; the AI SDK
    rightly refuses a call to a tool it was not given, which is not what the case is about.
    """
    names = {t["function"]["name"] for t in declared}
    missing = sorted({c.name for c in calls} - names)
    return (*declared, *(_tool(n, {"parameters": {"type": "object"}}) for n in missing))


def _golden_expect(
    golden: dict[str, Any], first: dict[str, Any], calls: tuple[ExpectedCall, ...]
) -> Expected:
    error = first.get("error")
    if error is not None:
        outcome: Literal["complete", "truncated", "error"] = "error"
    else:
        outcome = "complete" if golden["complete"] else "truncated"
    return Expected(
        outcome=outcome,
        content=first["content"],
        finish_reason=first["finish_reason"],
        calls=calls,
        error_contains=error["message"] if error else None,
    )


CASE_SOURCES: tuple[Callable[[], Iterator[Case]], ...] = (case_files, golden_cases)


@functools.cache
def load_cases() -> tuple[Case, ...]:
    cases = tuple(case for source in CASE_SOURCES for case in source())
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"case names must be unique across sources: {duplicates}")
    slashed = [n for n in names if "/" in n]
    if slashed:
        # The proxy routes on a "<route>/" prefix of the model name; the replayer strips it.
        raise ValueError(f"case names must not contain '/': {slashed}")
    return cases
