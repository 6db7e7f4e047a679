"""What the shell keeps for the app's lifetime, under typed keys. Nothing here is per stream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import ClientSession, web

from proxy.pump import StreamRewriter
from proxy.routing import Router, Upstream
from proxy.settings import Settings, UpstreamSettings


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    route: Upstream
    options: UpstreamSettings
    authorization: str | None  # "Bearer <key>" from the environment, never from the file


@dataclass(slots=True)
class ProxyState:
    settings: Settings
    router: Router
    upstreams: Mapping[str, UpstreamConfig]
    session: ClientSession

    def upstream(self, name: str) -> UpstreamConfig:
        return self.upstreams[name]

    def stream_rewriter(
        self, upstream: UpstreamConfig, request: web.Request, payload: object
    ) -> StreamRewriter | None:
        """The rewriting stage for a streamed response, or None to pass it through."""
        return None


STATE = web.AppKey("state", ProxyState)
REQUEST_ID = web.RequestKey("request_id", str)
