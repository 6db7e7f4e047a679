"""A lookup in a state table (the native repairers' lifecycle.py), where a missing pair can
only be a bug in the table: it raises NormalizerError naming the pair, which the caller's
fail-open path turns into the stream going out as it came."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

from proxy.core.errors import NormalizerError

S = TypeVar("S")
E = TypeVar("E", bound=Hashable)


def next_state(table: Mapping[tuple[S, E], S], state: S, step: E, missing: str) -> S:
    """``table[state, step]``; ``missing`` starts the error's text ("native Messages: no
    transition")."""
    try:
        return table[state, step]
    except KeyError:
        raise NormalizerError(f"{missing} from {state} on {step}") from None
