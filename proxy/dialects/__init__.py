"""The registry of tool-call markup dialects: the one place that lists them.

``DIALECTS`` maps the name used in the config to the class; ``build_extractor`` makes the
per-choice parser for a request. Unknown names are a configuration error that lists the known
ones (``check_names``), raised at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from proxy.dialects.base import Extractor, Tools
from proxy.errors import ConfigError

DIALECTS: Final[Mapping[str, object]] = {}


def check_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate configured dialect names; "auto" means all of them."""
    if list(names) == ["auto"]:
        return tuple(DIALECTS)
    unknown = [n for n in names if n not in DIALECTS]
    if unknown:
        known = ", ".join(sorted(DIALECTS)) or "(none)"
        raise ConfigError(f"unknown dialect(s) {', '.join(unknown)}; known: {known}, auto")
    return tuple(names)


def build_extractor(names: Sequence[str], tools: Tools) -> Extractor | None:
    """The content parser for one choice, or None when no dialect applies."""
    return None
