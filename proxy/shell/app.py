"""The app factory: settings in, a ready aiohttp Application out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final

from aiohttp import ClientSession, DummyCookieJar, hdrs, web

from proxy.core.errors import ConfigError
from proxy.core.options import UpstreamOptions
from proxy.core.routing import Router, Upstream
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app_state import STATE, Live, ProxyState, UpstreamConfig, config_digest
from proxy.shell.auth import ClientKeys
from proxy.shell.drain import Drain
from proxy.shell.fleet_metrics import Fleet
from proxy.shell.handlers import OWN_PREFIX, handle_proxy
from proxy.shell.keepalive import ReuseConnector
from proxy.shell.limits import replica_pool
from proxy.shell.metrics import METRICS, Metrics, handle_metrics
from proxy.shell.middlewares import proxy_middleware, response_prepared
from proxy.shell.readiness import READINESS, Readiness, handle_ready
from proxy.shell.replica_health import probe_replicas
from proxy.shell.request_body import expect_handler
from proxy.shell.template_probe import (
    START_TIMEOUT,
    TemplateState,
    read_template,
    read_until_answered,
    reads_template,
)


def build_routes(settings: Settings) -> tuple[Router, dict[str, UpstreamConfig]]:
    """Everything a request's way to an upstream is made of, from the settings alone: the
    router and each upstream's state (its replicas, with fresh health, in-flight counts of
    zero). A configuration reload swaps both in; the requests in flight keep the ones they
    started with."""
    upstreams = build_upstreams(settings)
    return Router([u.route for u in upstreams.values()], settings.default_upstream), upstreams


def build_upstreams(settings: Settings) -> dict[str, UpstreamConfig]:
    configs = {}
    for options in settings.upstreams:
        key = options.api_key()
        core = upstream_options(options, settings) if options.normalize else None
        urls = options.replica_urls()
        configs[options.name] = UpstreamConfig(
            route=Upstream(options.name, urls[0], tuple(options.models)),
            options=options,
            authorization=f"Bearer {key}" if key is not None else None,
            normalize=core,
            replicas=replica_pool(options),
            template=TemplateState(core.template if core is not None else None),
        )
    return configs


def upstream_options(options: UpstreamSettings, settings: Settings) -> UpstreamOptions:
    """The one value through which an upstream's settings reach the core (core/options.py).

    A field of ``UpstreamOptions`` named like a setting of the upstream (``dedupe_calls``) or
    of ``limits`` (``max_held_bytes``) is copied from it as it is, so that adding such a
    setting touches no line here; the fields the core reads in another form than the
    settings give are made below. A field neither copied nor made stops the start (it would
    silently keep its default: how two limits once got lost on the way to native mode)."""
    copied: dict[str, Any] = {}
    for name in UpstreamOptions.__dataclass_fields__:
        if name in _MADE:
            continue
        source = next((s for s in (options, settings.limits) if name in type(s).model_fields), None)
        if source is None:
            raise ConfigError(
                f"UpstreamOptions.{name} has no setting of the same name (upstreams[] or"
                " limits) and is not made in proxy/shell/app.py upstream_options"
            )
        copied[name] = getattr(source, name)
    return UpstreamOptions(
        coalesce=options.output == "coalesced",
        dialects=options.dialect_names(),
        request_repairs=options.request_repairs == "auto",
        template=options.template_needs(),
        **copied,
    )


#: the fields upstream_options makes rather than copies
_MADE: Final = frozenset({"coalesce", "dialects", "request_repairs", "template"})


def client_keys(settings: Settings) -> ClientKeys | None:
    """The inbound keys ``auth.*`` names, read now (a reload reads them again)."""
    return ClientKeys(settings.auth.client_keys()) if settings.auth.enabled else None


async def handle_health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


# Endpoints that stay open when inbound authentication is on: probes carry no credentials.
PUBLIC: Final = frozenset({handle_health, handle_ready})


def create_app(settings: Settings, fleet: Fleet | None = None) -> web.Application:
    """The proxy's app; ``fleet`` when it is one of several workers (its ``/-/metrics`` then
    reports them all)."""
    drain = Drain(settings.timeouts.shutdown_grace)
    # a 401 is logged and shaped like any error; checked on every request, since a reload may
    # turn authentication on (the running configuration's keys, None: off)
    middleware = proxy_middleware(
        own_prefix=OWN_PREFIX,
        drain=drain,
        keys_of=lambda request: request.app[STATE].now.keys,
        public=PUBLIC,
    )
    app = web.Application(
        middlewares=[middleware], client_max_size=settings.limits.max_request_body_bytes
    )
    app.on_response_prepare.append(response_prepared)
    app.on_shutdown.append(drain.on_shutdown)
    app.on_cleanup.append(drain.on_cleanup)
    router, upstreams = build_routes(settings)
    app[METRICS] = Metrics(upstreams)
    app[READINESS] = Readiness()

    async def client_session(app: web.Application) -> AsyncIterator[None]:
        session = ClientSession(
            connector=ReuseConnector(limit=0),
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
        )
        app[STATE] = Live(
            ProxyState(
                settings, router, upstreams, session, client_keys(settings), config_digest(settings)
            )
        )
        app[METRICS].config_loaded(app[STATE].now.digest)
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
        health = asyncio.create_task(probe_replicas(app))
        yield
        health.cancel()
        for probe in probes:
            probe.cancel()
        await asyncio.gather(health, *probes, return_exceptions=True)
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
