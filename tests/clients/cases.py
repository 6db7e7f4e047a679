"""The cases of the client matrix: an upstream response to replay and what a client must get.

A case is a TOML file in `cases/` naming the body to replay (an `.sse` beside it, or a recorded
stream under tests/fixtures/upstream/) and the result every client must reconstruct from it.
Every source in CASE_SOURCES is read at collection time, so a new case file is a new row of the
matrix without any code change.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

HERE = Path(__file__).parent
CASES_DIR = HERE / "cases"
TOOLS_FILE = HERE / "tools.toml"

PROMPT = "What is the weather in Paris?"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectedCall(_Strict):
    name: str
    # None: the upstream sent no id, so any non-empty id the proxy makes up is right.
    id: str | None = None
    arguments: dict[str, Any]


class Expected(_Strict):
    """What a client must reconstruct.

    complete: everything is checked (calls, content, finish_reason) and the client must not
        raise.
    truncated: the upstream stopped early; the client may raise, but the calls and content that
        did arrive must be kept.
    error: the upstream refused; the client must raise an error carrying `error_contains`.
    """

    outcome: Literal["complete", "truncated", "error"] = "complete"
    content: str = ""
    finish_reason: str | None = None
    calls: tuple[ExpectedCall, ...] = ()
    error_contains: str | None = None


class _CaseFile(_Strict):
    about: str
    body: str
    tools: tuple[str, ...] = ()
    stream: bool = True
    status: int = 200
    content_type: str | None = None
    # The clients this shape breaks without the proxy, as measured (see MATRIX.md). Optional:
    # a case without it is only required to be right through the proxy.
    wrong_unaided: frozenset[str] | None = None
    expect: Expected


@dataclass(frozen=True)
class Case:
    name: str
    about: str
    body: bytes
    stream: bool
    status: int
    content_type: str
    tools: tuple[dict[str, Any], ...]
    expect: Expected
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
        return body


def _tool_catalog() -> dict[str, dict[str, Any]]:
    with TOOLS_FILE.open("rb") as f:
        specs = tomllib.load(f)
    return {
        name: {"type": "function", "function": {"name": name, **spec}}
        for name, spec in specs.items()
    }


def case_files(directory: Path = CASES_DIR) -> Iterator[Case]:
    """The hand-written and fixture cases: one `<name>.toml` per case."""
    catalog = _tool_catalog()
    for path in sorted(directory.glob("*.toml")):
        with path.open("rb") as f:
            spec = _CaseFile.model_validate(tomllib.load(f))
        unknown = [t for t in spec.tools if t not in catalog]
        if unknown:
            raise ValueError(f"{path}: tools {unknown} are not in {TOOLS_FILE.name}")
        body_path = (path.parent / spec.body).resolve()
        yield Case(
            name=path.stem,
            about=spec.about,
            body=body_path.read_bytes(),
            stream=spec.stream,
            status=spec.status,
            content_type=spec.content_type
            or ("text/event-stream" if spec.stream else "application/json"),
            tools=tuple(catalog[t] for t in spec.tools),
            expect=spec.expect,
            wrong_unaided=spec.wrong_unaided,
            origin=path,
        )


CASE_SOURCES: tuple[Callable[[], Iterator[Case]], ...] = (case_files,)


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
