"""``GET /-/ready``: 200 when every configured upstream answers, 503 naming those that do not.

An upstream with replicas (``urls``) answers when at least one of its replicas does; each
replica is asked, and the body names each one's answer under the upstream's ``replicas``.

Liveness (``/-/health``) says the proxy itself serves; readiness says it can do its job, so a
load balancer or Kubernetes sends it traffic only then. Each upstream is asked
``GET <url>/v1/models`` (with its configured credentials), which every OpenAI-compatible
server serves and which llama-server answers 503 while it loads its model. The answer is
cached for ``CACHE_SECONDS`` and concurrent probes share one round of checks, so frequent
probes from many replicas' kubelets cost the upstreams little.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from aiohttp import ClientError, ClientTimeout, hdrs, web

from proxy.core.routing import upstream_url
from proxy.shell.app_state import STATE, ProxyState, UpstreamConfig
from proxy.shell.template_probe import read_template, reads_template

CHECK_PATH: Final = "/v1/models"
CHECK_TIMEOUT_SECONDS: Final = 2.0
CACHE_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class UpstreamCheck:
    ok: bool
    detail: str  # "status 200", "status 503", "timed out after 2.0 s", "unreachable: ..."
    # with several replicas: each one's check by URL (``detail`` then counts those that answer)
    replicas: dict[str, UpstreamCheck] | None = None


Report = dict[str, UpstreamCheck]


class Readiness:
    def __init__(
        self, timeout: float = CHECK_TIMEOUT_SECONDS, cache_seconds: float = CACHE_SECONDS
    ) -> None:
        self._timeout = timeout
        self._cache_seconds = cache_seconds
        self._checked_at = float("-inf")
        self._report: Report = {}
        self._pending: asyncio.Task[Report] | None = None

    async def report(self, state: ProxyState) -> Report:
        loop = asyncio.get_running_loop()
        if loop.time() - self._checked_at < self._cache_seconds:
            return self._report
        if self._pending is None:
            self._pending = loop.create_task(self._check_all(state))
        # Shielded: a prober that gives up must not cancel the round others are waiting for.
        return await asyncio.shield(self._pending)

    async def _check_all(self, state: ProxyState) -> Report:
        try:
            upstreams = [state.upstream(u.name) for u in state.router.upstreams]
            results = await asyncio.gather(*(self._check(state, u) for u in upstreams))
            # and what each one's chat template needs, in case it changed (a new model)
            await asyncio.gather(
                *(
                    read_template(state.session, u.route.base_url, u.authorization, u.template)
                    for u in upstreams
                    if reads_template(u)
                )
            )
            self._report = {u.route.name: r for u, r in zip(upstreams, results, strict=True)}
            self._checked_at = asyncio.get_running_loop().time()
            return self._report
        finally:
            self._pending = None

    async def _check(self, state: ProxyState, upstream: UpstreamConfig) -> UpstreamCheck:
        urls = [replica.url for replica in upstream.replicas.replicas]
        checks = await asyncio.gather(*(self._check_one(state, upstream, url) for url in urls))
        if len(checks) == 1:
            return checks[0]
        answering = sum(check.ok for check in checks)
        return UpstreamCheck(
            answering > 0,
            f"{answering} of {len(checks)} replicas answer",
            dict(zip(urls, checks, strict=True)),
        )

    async def _check_one(
        self, state: ProxyState, upstream: UpstreamConfig, base_url: str
    ) -> UpstreamCheck:
        headers = {}
        if upstream.authorization is not None:
            headers[hdrs.AUTHORIZATION] = upstream.authorization
        try:
            async with state.session.get(
                upstream_url(base_url, CHECK_PATH),
                headers=headers,
                allow_redirects=False,
                timeout=ClientTimeout(total=self._timeout),
            ) as resp:
                return UpstreamCheck(resp.status == 200, f"status {resp.status}")
        except TimeoutError:
            return UpstreamCheck(False, f"timed out after {self._timeout:g} s")
        except ClientError as exc:
            return UpstreamCheck(False, f"unreachable: {type(exc).__name__}")


READINESS = web.AppKey("readiness", Readiness)


async def handle_ready(request: web.Request) -> web.Response:
    report = await request.app[READINESS].report(request.app[STATE].now)
    ready = all(check.ok for check in report.values())
    body = {
        "status": "ready" if ready else "not ready",
        "upstreams": {name: _shown(check) for name, check in report.items()},
    }
    return web.json_response(body, status=200 if ready else 503)


def _shown(check: UpstreamCheck) -> dict[str, object]:
    shown: dict[str, object] = {"ok": check.ok, "detail": check.detail}
    if check.replicas is not None:
        shown["replicas"] = {url: _shown(one) for url, one in check.replicas.items()}
    return shown
