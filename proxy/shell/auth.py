"""Optional inbound authentication: a client must present one of the configured bearer keys.

When keys are configured (settings ``auth``), every request needs ``Authorization: Bearer
<key>`` except those routed to the proxy's public endpoints (``/-/health``), which probes call
without credentials. A missing or wrong key is a 401 in the OpenAI error shape. The key is
the proxy's, not the upstream's: the handlers never forward it.

Keys are compared in constant time: each candidate is hashed first, so neither the content
nor the length of a key shows in the timing, and every configured key is compared, so the
position of a match does not either.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Sequence

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware

from proxy.core.errors import UnauthorizedError


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ClientKeys:
    def __init__(self, keys: Sequence[str]) -> None:
        if not keys or not all(keys):
            raise ValueError("client keys must be a non-empty list of non-empty keys")
        self._digests = tuple(_digest(k) for k in keys)

    def accepts(self, authorization: str | None) -> bool:
        scheme, _, token = (authorization or "").strip().partition(" ")
        # No key is empty, so anything but "Bearer <key>" never matches.
        candidate = _digest(token.strip() if scheme.lower() == "bearer" else "")
        matched = False
        for digest in self._digests:
            matched |= hmac.compare_digest(digest, candidate)
        return matched


def auth_middleware(keys: ClientKeys, public: Collection[Handler]) -> Middleware:
    """Refuse requests without an accepted key, except those routed to a ``public`` handler."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.match_info.handler not in public and not keys.accepts(
            request.headers.get(hdrs.AUTHORIZATION)
        ):
            raise UnauthorizedError("a valid API key is required: Authorization: Bearer <key>")
        return await handler(request)

    return middleware
