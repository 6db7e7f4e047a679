"""The app factory: settings in, a ready aiohttp Application out."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import ClientSession, DummyCookieJar, TCPConnector, hdrs, web

from proxy.handlers import handle_proxy
from proxy.middlewares import error_middleware, request_id_middleware
from proxy.routing import Router, Upstream
from proxy.settings import Settings
from proxy.state import STATE, ProxyState, UpstreamConfig

# The proxy's own endpoints live under a prefix that no LLM server uses, so that an upstream's
# /health and /metrics stay reachable through the proxy.
OWN_PREFIX = "/-/"


def build_upstreams(settings: Settings) -> dict[str, UpstreamConfig]:
    configs = {}
    for options in settings.upstreams:
        key = options.api_key()
        configs[options.name] = UpstreamConfig(
            route=Upstream(options.name, options.url, tuple(options.models)),
            options=options,
            authorization=f"Bearer {key}" if key is not None else None,
        )
    return configs


async def handle_health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def create_app(settings: Settings) -> web.Application:
    app = web.Application(
        middlewares=[request_id_middleware, error_middleware],
        client_max_size=settings.limits.max_request_body_bytes,
    )
    upstreams = build_upstreams(settings)
    router = Router([u.route for u in upstreams.values()], settings.default_upstream)

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
        )
        app[STATE] = ProxyState(settings, router, upstreams, session)
        yield
        await session.close()

    app.cleanup_ctx.append(client_session)
    app.router.add_get(OWN_PREFIX + "health", handle_health)
    app.router.add_route("*", "/{tail:.*}", handle_proxy)
    return app
