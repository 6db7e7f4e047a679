"""The id factory the shell injects into the core: ids drawn from ``secrets``."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from proxy.core.ids import ALPHABET, ID_LENGTH


def new_id_factory() -> Callable[[], str]:
    """A factory for one response: it never repeats an id it made."""
    issued: set[str] = set()

    def new_id() -> str:
        while True:
            candidate = "".join(secrets.choice(ALPHABET) for _ in range(ID_LENGTH))
            if candidate not in issued:
                issued.add(candidate)
                return candidate

    return new_id
