"""Which upstream serves a request: pure, from the request's model name and the config.

Rules, in order:
1. A request that names a model goes to the first upstream with a pattern matching it
   (shell-style globs, case-sensitive: ``llama-*``, ``*``).
2. Otherwise it goes to ``default_upstream`` when one is configured.
3. A request that names no model (GET /props, a non-JSON body) goes to the only upstream when
   there is just one.
4. Anything else is a 404 naming the model.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from proxy.core.errors import NoRouteError, shown


@dataclass(frozen=True, slots=True)
class Upstream:
    name: str
    base_url: str  # origin plus optional path prefix, without a trailing slash
    patterns: tuple[str, ...]


class Router:
    def __init__(self, upstreams: Sequence[Upstream], default: str | None = None) -> None:
        self.upstreams = tuple(upstreams)
        by_name = {u.name: u for u in self.upstreams}
        self._default = by_name[default] if default is not None else None
        only = self.upstreams[0] if len(self.upstreams) == 1 else None
        self._modelless = self._default or only
        # One compiled alternation per upstream keeps routing O(upstreams), not O(patterns).
        self._compiled = [
            (re.compile("|".join(fnmatch.translate(p) for p in u.patterns)), u)
            for u in self.upstreams
        ]

    def route(self, model: str | None) -> Upstream:
        if model is None:
            if self._modelless is None:
                raise NoRouteError(
                    "the request names no model and no default_upstream is configured"
                )
            return self._modelless
        for pattern, upstream in self._compiled:
            if pattern.match(model):
                return upstream
        if self._default is not None:
            return self._default
        raise NoRouteError(f"no upstream serves model {shown(model)}")


def upstream_url(base_url: str, raw_path_and_query: str) -> str:
    """The client's path (and query) appended unchanged to the upstream's base URL."""
    return base_url + raw_path_and_query


def is_safe_path(raw_path_and_query: str) -> bool:
    """False when the path could climb out of an upstream's path prefix.

    The path is forwarded raw, so an upstream that resolves dot segments itself would serve
    ``/prefix/../admin``; they are refused, however many times they are percent-encoded, and
    with path parameters (``..;``) too.
    """
    path = raw_path_and_query.partition("?")[0]
    if not path.startswith("/"):
        return False
    if "." not in path and "%" not in path:  # no dot, none encoded: nothing to look for
        return True
    for _ in range(4):
        segments = path.replace("\\", "/").split("/")
        # "..;x" is ".." to servers that strip path parameters (Tomcat, Spring).
        if any(segment.partition(";")[0] in (".", "..") for segment in segments):
            return False
        decoded = unquote(path)
        if decoded == path:
            return True
        path = decoded
    return False
