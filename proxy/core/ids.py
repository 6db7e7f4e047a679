"""Tool-call ids for calls whose upstream sent none.

Nine ASCII letters and digits: Mistral rejects any other id on the next request
(docs/quirks.md K3), and every other client accepts it. One factory serves one
response; it never repeats an id. The normalizer receives the factory (the shell's draws from
``secrets``: proxy/shell/random_ids.py), so the core itself stays free of randomness and tests
inject a deterministic one.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from typing import Final

ID_LENGTH: Final = 9
ALPHABET: Final = string.ascii_letters + string.digits


class IdPool:
    """The ids of one response: a synthesized id must not repeat one the upstream sent."""

    __slots__ = ("_new_id", "_taken")

    def __init__(self, new_id: Callable[[], str], taken: Iterable[str] = ()) -> None:
        self._new_id = new_id
        self._taken = set(taken)

    def add(self, ident: str) -> None:
        self._taken.add(ident)

    def fresh(self) -> str:
        candidate = self._new_id()
        for _ in range(1000):  # bounded: a factory that keeps repeating cannot be helped
            if candidate not in self._taken:
                break
            candidate = self._new_id()
        self._taken.add(candidate)
        return candidate
