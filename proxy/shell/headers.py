"""Header rules for both directions of the proxy (RFC 9110 section 7.6.1)."""

from __future__ import annotations

from collections.abc import Iterable
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
    headers: CIMultiDictProxy[str] | CIMultiDict[str], drop: Iterable[str] = ()
) -> CIMultiDict[str]:
    """Copy ``headers`` without hop-by-hop ones, Proxy-*, those named by Connection, ``drop``."""
    skip: frozenset[str] | set[str] = HOP_BY_HOP
    if drop or "Connection" in headers:  # else the common case: no set to build per request
        skip = HOP_BY_HOP | {d.lower() for d in drop}
        skip |= {
            token.strip().lower()
            for value in headers.getall("Connection", ())
            for token in value.split(",")
            if token.strip()
        }
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lower = name.lower()
        # Proxy-* headers are meant for a proxy on the path; "Proxy" itself is the httpoxy
        # vector (a CGI-style upstream would take it for its HTTP_PROXY).
        if lower not in skip and lower != "proxy" and not lower.startswith("proxy-"):
            out.add(name, value)
    return out
