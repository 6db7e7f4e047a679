"""Which key the upstream gets, by how the request goes (proxy/core/policy.py's modes).

An upstream with a key of its own (``api_key_env``) gets that key and nothing of the client's:
neither its ``Authorization`` nor its ``x-api-key``.

* Chat, passthrough: the upstream's key as ``Authorization: Bearer``; without one, the client's
  headers as they came.
* Translate (a Messages or Responses client over a chat upstream): the upstream's key as
  Bearer; without one, the client's ``x-api-key`` as Bearer, so that the key a user gave
  Claude Code reaches a chat server that checks keys. The Anthropic-only headers
  (``x-api-key``, ``anthropic-version``, ``anthropic-beta``) are not sent to a chat server.
* Native Messages, and its ``count_tokens`` (passed through to the upstream's own): the
  upstream's key in the header the protocol names (``ClientProtocol.key_header``:
  ``x-api-key``), replacing the client's key in either header.
* ``GET /v1/models``, asked of every upstream: a keyed upstream its key as Bearer; a keyless
  one the client's ``Authorization``, as a request routed to it would carry it, and the
  client's ``x-api-key`` only where a Messages request routed to it would (native mode, or
  ``normalize = false``), never to one that translates Messages.

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
    plan: Plan,
    authorization: str | None,
    *,
    auth_enabled: bool,
) -> None:
    """Set the upstream's credentials in ``headers`` (the client's, copied end to end);
    ``authorization`` is the upstream's own ``Bearer <key>``, if it has one."""
    if auth_enabled:  # the client's key is the proxy's: never forwarded
        headers.popall(hdrs.AUTHORIZATION, None)
        headers.popall(API_KEY, None)
    if plan.mode is Mode.TRANSLATE:
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
    own = _own_key_header(plan)
    if own is not None:
        headers.popall(hdrs.AUTHORIZATION, None)
        headers[own] = authorization.removeprefix("Bearer ")
        return
    headers.popall(API_KEY, None)
    headers[hdrs.AUTHORIZATION] = authorization  # replaces every client value


def apply_listing_credentials(
    headers: CIMultiDict[str],
    key_plans: list[Plan],
    authorization: str | None,
    *,
    auth_enabled: bool,
) -> None:
    """``GET /v1/models`` to one upstream: ``key_plans`` is how a request of each protocol
    with a key header of its own, routed to it, goes (policy.own_key_plans): whether it
    would carry the client's key in that header."""
    if auth_enabled:
        headers.popall(hdrs.AUTHORIZATION, None)
        headers.popall(API_KEY, None)
    if authorization is not None:
        headers.popall(API_KEY, None)
        headers[hdrs.AUTHORIZATION] = authorization
        return
    for plan in key_plans:
        if plan.mode is Mode.TRANSLATE and plan.protocol is not None:
            headers.popall(plan.protocol.key_header or API_KEY, None)


def _own_key_header(plan: Plan) -> str | None:
    """The header a request to an upstream's own API of a protocol takes its key in: native
    mode, or a path beside it (count_tokens) passed through to that upstream; None for
    ``Authorization``."""
    native = plan.mode is Mode.NATIVE or (
        plan.mode is Mode.PASSTHROUGH and plan.protocol is not None
    )
    return plan.protocol.key_header if native and plan.protocol is not None else None
