"""X-Forwarded-For and X-Forwarded-Proto on requests to upstreams (settings ``forwarded``).

Any client can send these headers, so the client's own are removed unless the operator says
every client is a trusted proxy (``trust_incoming``), in which case the client's address is
appended to the chain it sent and its scheme is kept. The other forwarding headers go with
them: an upstream that builds URLs from a forged X-Forwarded-Host would hand them to others.
"""

from __future__ import annotations

from typing import Final

from multidict import CIMultiDict

from proxy.settings import ForwardedSettings

FORWARDING_HEADERS: Final = (
    "Forwarded",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "X-Forwarded-Port",
    "X-Forwarded-Prefix",
    "X-Forwarded-Proto",
    "X-Real-IP",
)


def set_forwarded(
    headers: CIMultiDict[str], *, remote: str | None, scheme: str, settings: ForwardedSettings
) -> None:
    """Rewrite the forwarding headers of ``headers``, a copy of the client's, in place."""
    chain = ", ".join(headers.getall("X-Forwarded-For", ()))
    proto = headers.get("X-Forwarded-Proto")
    if not settings.trust_incoming:
        for name in FORWARDING_HEADERS:
            headers.popall(name, None)
        chain, proto = "", None
    if settings.add:
        address = remote or ""
        headers["X-Forwarded-For"] = f"{chain}, {address}" if chain else address
        headers["X-Forwarded-Proto"] = proto or scheme
