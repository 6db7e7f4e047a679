"""The app factory: settings in, a ready aiohttp Application out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

from aiohttp import ClientSession, DummyCookieJar, TCPConnector, hdrs, web
from aiohttp.typedefs import Middleware

from proxy.core.options import UpstreamOptions
from proxy.core.routing import Router, Upstream
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.accesslog import access_middleware
from proxy.shell.app_state import STATE, ProxyState, UpstreamConfig
from proxy.shell.auth import ClientKeys, auth_middleware
from proxy.shell.body import expect_handler
from proxy.shell.drain import Drain
from proxy.shell.fleet_metrics import Fleet
from proxy.shell.handlers import OWN_PREFIX, handle_proxy
from proxy.shell.keepalive import reuse_tracing
from proxy.shell.limits import Slots
from proxy.shell.metrics import METRICS, Metrics, handle_metrics
from proxy.shell.middlewares import (
    error_middleware,
    note_response_started,
    request_id_middleware,
    request_line_middleware,
)
from proxy.shell.readiness import READINESS, Readiness, handle_ready
from proxy.shell.template_probe import (
    START_TIMEOUT,
    TemplateState,
    read_template,
    read_until_answered,
    reads_template,
)


def build_upstreams(settings: Settings) -> dict[str, UpstreamConfig]:
    configs = {}
    for options in settings.upstreams:
        key = options.api_key()
        core = upstream_options(options, settings) if options.normalize else None
        configs[options.name] = UpstreamConfig(
            route=Upstream(options.name, options.url, tuple(options.models)),
            options=options,
            authorization=f"Bearer {key}" if key is not None else None,
            normalize=core,
            slots=Slots(options.name, options.max_concurrent_requests),
            template=TemplateState(core.template if core is not None else None),
        )
    return configs


def upstream_options(options: UpstreamSettings, settings: Settings) -> UpstreamOptions:
    """The one value through which an upstream's settings reach the core (core/options.py)."""
    limits = settings.limits
    return UpstreamOptions(
        coalesce=options.output == "coalesced",
        dialects=options.dialect_names(),
        extract_from_reasoning=options.extract_from_reasoning,
        dedupe_calls=options.dedupe_calls,
        max_event_bytes=limits.max_event_bytes,
        max_held_bytes=limits.max_held_bytes,
        max_response_body_bytes=limits.max_response_body_bytes,
        request_repairs=options.request_repairs == "auto",
        template=options.template_needs(),
        heal_arguments=options.heal_arguments,
        coerce_arguments=options.coerce_arguments,
        enforce_parallel_tool_calls=options.enforce_parallel_tool_calls,
    )


async def handle_health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


# Endpoints that stay open when inbound authentication is on: probes carry no credentials.
PUBLIC: Final = frozenset({handle_health, handle_ready})


def create_app(settings: Settings, fleet: Fleet | None = None) -> web.Application:
    """The proxy's app; ``fleet`` when it is one of several workers (its ``/-/metrics`` then
    reports them all)."""
    drain = Drain(settings.timeouts.shutdown_grace)
    middlewares: list[Middleware] = [
        request_id_middleware,
        drain.middleware(),
        access_middleware(OWN_PREFIX),
        error_middleware,
        request_line_middleware,
    ]
    if settings.auth.enabled:  # innermost: a 401 is logged and shaped like any error
        middlewares.append(auth_middleware(ClientKeys(settings.auth.client_keys()), PUBLIC))
    app = web.Application(
        middlewares=middlewares, client_max_size=settings.limits.max_request_body_bytes
    )
    app.on_response_prepare.append(note_response_started)
    app.on_shutdown.append(drain.on_shutdown)
    app.on_cleanup.append(drain.on_cleanup)
    upstreams = build_upstreams(settings)
    router = Router([u.route for u in upstreams.values()], settings.default_upstream)
    app[METRICS] = Metrics(upstreams)
    app[READINESS] = Readiness()

    async def client_session(app: web.Application) -> AsyncIterator[None]:
        session = ClientSession(
            connector=TCPConnector(limit=0),
            # Bytes pass through as the upstream sent them: no decompression, no cookies
            # shared between clients, no headers the client did not send.
            auto_decompress=False,
            cookie_jar=DummyCookieJar(),
            skip_auto_headers=(
                hdrs.USER_AGENT,
                hdrs.ACCEPT,
                hdrs.ACCEPT_ENCODING,
                hdrs.CONTENT_TYPE,
            ),
            trust_env=False,
            trace_configs=[reuse_tracing()],
        )
        app[STATE] = ProxyState(settings, router, upstreams, session)
        # each upstream's chat template, read once at start (and on readiness rounds); one
        # that does not answer yet (still loading its model) is asked again in the background
        asking = [u for u in upstreams.values() if reads_template(u)]
        answered = await asyncio.gather(
            *(
                read_template(
                    session, u.route.base_url, u.authorization, u.template, timeout=START_TIMEOUT
                )
                for u in asking
            )
        )
        probes = [
            asyncio.create_task(
                read_until_answered(session, u.route.base_url, u.authorization, u.template)
            )
            for u, done in zip(asking, answered, strict=True)
            if not done
        ]
        yield
        for probe in probes:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)
        await session.close()

    app.cleanup_ctx.append(client_session)
    app.router.add_get(OWN_PREFIX + "health", handle_health)
    app.router.add_get(OWN_PREFIX + "ready", handle_ready)
    app.router.add_get(
        OWN_PREFIX + "metrics", fleet.handle_metrics if fleet is not None else handle_metrics
    )
    app.router.add_route(
        "*",
        "/{tail:.*}",
        handle_proxy,
        expect_handler=expect_handler(settings.limits.max_request_body_bytes),
    )
    return app
