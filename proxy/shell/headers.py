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
    named = {
        token.strip().lower()
        for value in headers.getall("Connection", ())
        for token in value.split(",")
        if token.strip()
    }
    skip = HOP_BY_HOP | named | {d.lower() for d in drop}
    return CIMultiDict(
        (k, v) for k, v in headers.items() if k.lower() not in skip and not _proxy_header(k)
    )


def _proxy_header(name: str) -> bool:
    """Proxy-* headers are meant for a proxy on the path; "Proxy" itself is the httpoxy
    vector (a CGI-style upstream would take it for its HTTP_PROXY)."""
    lower = name.lower()
    return lower == "proxy" or lower.startswith("proxy-")
