"""What each upstream's chat template needs, read from the upstream where it shows it.

llama-server answers ``GET /props`` with its ``chat_template`` (and ``chat_template_tool_use``
where the model has one); the core recognises the needs from the template's words
(proxy/core/request_repairs/needs.py). It is read once at start (retried until the upstream
answers, since it may still be loading) and again on every readiness round, never per client
request. An upstream that has no ``/props`` (vLLM, SGLang, ...) keeps the generic needs unless
its ``template`` setting names a family.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import orjson
from aiohttp import ClientError, ClientSession, ClientTimeout, hdrs

from proxy.core.request_repairs.needs import GENERIC, TemplateNeeds, needs_of_template
from proxy.core.routing import upstream_url

if TYPE_CHECKING:
    from proxy.shell.app_state import UpstreamConfig

log = logging.getLogger("toolcall_proxy")

PROPS_PATH: Final = "/props"
TIMEOUT_SECONDS: Final = 5.0
MAX_PROPS_BYTES: Final = 4 << 20
START_TIMEOUT: Final = 2.0  # the first ask, while the proxy starts; later ones in the background
RETRY_SECONDS: Final = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # then every 30 s until it answers


@dataclass(slots=True)
class TemplateState:
    """One upstream's needs: the setting's family, else what its template says."""

    configured: TemplateNeeds | None  #: from ``template = "<family>"``; None: "auto"
    read: TemplateNeeds | None = None  #: from the upstream's template, once it answered
    answered: bool = False  #: the upstream answered GET /props (with a template or not)

    @property
    def needs(self) -> TemplateNeeds:
        if self.configured is not None:
            return self.configured
        return self.read if self.read is not None else GENERIC


async def read_template(
    session: ClientSession,
    base_url: str,
    authorization: str | None,
    state: TemplateState,
    *,
    timeout: float = TIMEOUT_SECONDS,  # noqa: ASYNC109 (aiohttp's own timeout, per request)
) -> bool:
    """Ask the upstream once; True when it answered (whatever it said)."""
    headers = {hdrs.AUTHORIZATION: authorization} if authorization is not None else {}
    try:
        async with session.get(
            upstream_url(base_url, PROPS_PATH),
            headers=headers,
            allow_redirects=False,
            timeout=ClientTimeout(total=timeout),
        ) as resp:
            if resp.status >= 500:  # llama-server says 503 while it loads its model
                return False
            json_answer = resp.content_type == "application/json"
            # a template is some kilobytes; whatever else a server answers is not read whole
            body = (
                await resp.content.read(MAX_PROPS_BYTES)
                if resp.status == 200 and json_answer
                else b""
            )
    except (ClientError, TimeoutError):
        return False
    templates = _templates(body)
    read: TemplateNeeds | None = None
    for template in templates:
        read = (read or GENERIC) | needs_of_template(template)
    # said once, and again only when it changes: readiness rounds ask again and again
    if not state.answered or read != state.read:
        log.info("upstream %s: %s", base_url, _told(read))
    state.read = read
    state.answered = True
    return True


def _told(read: TemplateNeeds | None) -> str:
    if read is None:
        return "no chat template at GET /props; the generic request repairs apply"
    needs = [name for name in TemplateNeeds.__dataclass_fields__ if getattr(read, name)]
    if not needs:
        return "its chat template needs only the generic request repairs"
    return "its chat template needs " + ", ".join(needs)


def _templates(body: bytes) -> list[str]:
    try:
        props = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return []
    if not isinstance(props, dict):
        return []
    found = [props.get("chat_template"), props.get("chat_template_tool_use")]
    return [t for t in found if isinstance(t, str) and t]


async def read_until_answered(
    session: ClientSession, base_url: str, authorization: str | None, state: TemplateState
) -> None:
    """After a first ask at start went unanswered: ask until the upstream answers, backing off
    to every 30 s."""
    attempt = 0
    while True:
        await asyncio.sleep(RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)])
        if await read_template(session, base_url, authorization, state):
            return
        attempt += 1


def reads_template(upstream: UpstreamConfig) -> bool:
    """Whether the proxy asks this upstream for its template: it repairs requests (a
    normalizing upstream) and no family is configured."""
    return upstream.normalize is not None and upstream.template.configured is None
