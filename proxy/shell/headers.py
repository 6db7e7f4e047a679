"""Header rules for both directions of the proxy (RFC 9110 section 7.6.1)."""

from __future__ import annotations

from functools import cache
from typing import Final

from multidict import CIMultiDict, CIMultiDictProxy

HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


def end_to_end(
    headers: CIMultiDictProxy[str] | CIMultiDict[str],
    drop: tuple[str, ...] = (),
    into: CIMultiDict[str] | None = None,
) -> CIMultiDict[str]:
    """Copy ``headers`` without hop-by-hop ones, Proxy-*, those named by Connection, ``drop``,
    into ``into`` (a response's own headers: no copy in between) or a new multidict."""
    skip = _skipped(drop)
    if "Connection" in headers:
        skip = skip | {
            token.strip().lower()
            for value in headers.getall("Connection", ())
            for token in value.split(",")
            if token.strip()
        }
    out: CIMultiDict[str] = CIMultiDict() if into is None else into
    for name, value in headers.items():
        lower = name.lower()
        # Proxy-* headers are meant for a proxy on the path; "Proxy" itself is the httpoxy
        # vector (a CGI-style upstream would take it for its HTTP_PROXY).
        if lower not in skip and lower != "proxy" and not lower.startswith("proxy-"):
            out.add(name, value)
    return out


@cache
def _skipped(drop: tuple[str, ...]) -> frozenset[str]:
    """The hop-by-hop names and ``drop``'s, lowercased: a handful of tuples, each built once."""
    return HOP_BY_HOP | {d.lower() for d in drop}
