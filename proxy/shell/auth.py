"""Optional inbound authentication: a client must present one of the configured bearer keys.

When keys are configured (settings ``auth``), every request needs ``Authorization: Bearer
<key>``, or ``x-api-key: <key>`` as Anthropic clients send it, except those routed to the
proxy's public endpoints (``/-/health``), which probes call without credentials. A missing
or wrong key is a 401 in the error shape of the client's protocol. The key is the proxy's,
not the upstream's: the handlers never forward it.

Keys are compared in constant time: each candidate is hashed first, so neither the content
nor the length of a key shows in the timing, and every configured key is compared, so the
position of a match does not either.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Sequence

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from proxy.core.errors import UnauthorizedError

API_KEY = "x-api-key"  # the header the Anthropic clients send their key in


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ClientKeys:
    def __init__(self, keys: Sequence[str]) -> None:
        if not keys or not all(keys):
            raise ValueError("client keys must be a non-empty list of non-empty keys")
        self._digests = tuple(_digest(k) for k in keys)

    def accepts(self, authorization: str | None, api_key: str | None = None) -> bool:
        """``Authorization: Bearer <key>``, else ``x-api-key: <key>`` (the Anthropic clients')."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        # No key is empty, so anything but "Bearer <key>" never matches.
        presented = token.strip() if scheme.lower() == "bearer" else ""
        candidate = _digest(presented or (api_key or "").strip())
        matched = False
        for digest in self._digests:
            matched |= hmac.compare_digest(digest, candidate)
        return matched


def check_key(request: web.Request, keys: ClientKeys, public: Collection[Handler]) -> None:
    """Refuse a request without an accepted key (a 401), unless it is routed to a ``public``
    handler; the proxy's one middleware (proxy.shell.middlewares) asks, when keys are set."""
    if request.match_info.handler not in public and not keys.accepts(
        request.headers.get(hdrs.AUTHORIZATION), request.headers.get(API_KEY)
    ):
        raise UnauthorizedError(
            "a valid API key is required: Authorization: Bearer <key> (or x-api-key: <key>)"
        )
