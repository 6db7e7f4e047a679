"""Which key the upstream gets, by how the request goes (proxy/core/policy.py's modes).

* Chat, passthrough: the upstream's ``api_key_env`` as ``Authorization: Bearer``, replacing
  the client's (as before).
* Translate (a Messages or Responses client over a chat upstream): the upstream's key as
  Bearer; without one, the client's ``x-api-key`` as Bearer, so that the key a user gave
  Claude Code reaches a chat server that checks keys. The Anthropic-only headers
  (``x-api-key``, ``anthropic-version``, ``anthropic-beta``) are not sent to a chat server.
* Native Messages: the upstream's key as ``x-api-key``, replacing the client's key in either
  header.

With inbound keys on (``auth``), the client's key is the proxy's and is never forwarded.
"""

from __future__ import annotations

from aiohttp import hdrs
from multidict import CIMultiDict

from proxy.core.policy import Mode, Plan
from proxy.shell.auth import API_KEY

_ANTHROPIC = ("anthropic-version", "anthropic-beta")


def apply_credentials(
    headers: CIMultiDict[str],
    plan: Plan | None,
    authorization: str | None,
    *,
    auth_enabled: bool,
) -> None:
    """Set the upstream's credentials in ``headers`` (the client's, copied end to end);
    ``authorization`` is the upstream's own ``Bearer <key>``, if it has one."""
    if auth_enabled:  # the client's key is the proxy's: never forwarded
        headers.popall(hdrs.AUTHORIZATION, None)
        headers.popall(API_KEY, None)
    mode = plan.mode if plan is not None else None
    if mode is Mode.TRANSLATE:
        client_key = headers.popall(API_KEY, [""])[0].strip()
        for name in _ANTHROPIC:
            headers.popall(name, None)
        if authorization is not None:
            headers[hdrs.AUTHORIZATION] = authorization
        elif client_key and hdrs.AUTHORIZATION not in headers:
            headers[hdrs.AUTHORIZATION] = f"Bearer {client_key}"
        return
    if authorization is None:
        return
    native_messages = (
        mode is Mode.NATIVE and plan is not None and plan.protocol is not None
    ) and plan.protocol.name == "messages"
    if native_messages:
        headers.popall(hdrs.AUTHORIZATION, None)
        headers[API_KEY] = authorization.removeprefix("Bearer ")
        return
    headers[hdrs.AUTHORIZATION] = authorization  # replaces every client value
