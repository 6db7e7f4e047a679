"""The record of client limits accepted through the proxy (limits.toml), and how a cell is
matched against it: narrowly, so that the record excuses one known fault and nothing else."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tests.clients.cases import HERE
from tests.clients.verdicts import Verdict

LIMITS_FILE = HERE / "limits.toml"


class Limit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    case: str
    client: str
    target: Literal["streamed", "coalesced"]
    reason: str  #: a substring every reason of the cell's verdict must contain
    why: str  #: one sentence: the docs/quirks.md entry that keeps the shape, and the remedy

    def stray_reasons(self, verdict: Verdict) -> list[str]:
        """The verdict's reasons this limit does not cover."""
        return [r for r in verdict.reasons if self.reason not in r]

    def excuses(self, verdict: Verdict) -> bool:
        return not verdict.right and not self.stray_reasons(verdict)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: tuple[Limit, ...] = ()


@functools.cache
def load_limits() -> dict[tuple[str, str, str], Limit]:
    """The limits by (case, client, target)."""
    with LIMITS_FILE.open("rb") as f:
        limits = _File.model_validate(tomllib.load(f)).limit
    by_cell: dict[tuple[str, str, str], Limit] = {(x.case, x.client, x.target): x for x in limits}
    if len(by_cell) != len(limits):
        raise ValueError(f"{LIMITS_FILE.name} lists a cell twice")
    return by_cell


def unknown_names(cases: Iterable[str], clients: Iterable[str]) -> list[str]:
    """The cases and clients limits.toml names that the matrix does not have."""
    limits = load_limits().values()
    return sorted(
        ({x.case for x in limits} - set(cases)) | ({x.client for x in limits} - set(clients))
    )
