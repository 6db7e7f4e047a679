"""What the shell keeps for the app's lifetime, under typed keys. Nothing here is per stream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import ClientSession, web

from proxy.core.protocols.chat.normalize import NormalizeOptions, RequestInfo, StreamNormalizer
from proxy.core.routing import Router, Upstream
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.limits import Slots
from proxy.shell.random_ids import new_id_factory


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    route: Upstream
    options: UpstreamSettings
    authorization: str | None  # "Bearer <key>" from the environment, never from the file
    normalize: NormalizeOptions | None  # None: this upstream is pure passthrough
    slots: Slots  # requests in flight against options.max_concurrent_requests


@dataclass(slots=True)
class ProxyState:
    settings: Settings
    router: Router
    upstreams: Mapping[str, UpstreamConfig]
    session: ClientSession

    def upstream(self, name: str) -> UpstreamConfig:
        return self.upstreams[name]


def is_chat_completion(request: web.Request) -> bool:
    return request.method == "POST" and request.path.endswith("/chat/completions")


def stream_normalizer(
    upstream: UpstreamConfig, request: web.Request, info: RequestInfo
) -> StreamNormalizer | None:
    """The rewriting stage for a streamed chat completion, or None to pass it through."""
    if upstream.normalize is None or not is_chat_completion(request):
        return None
    return StreamNormalizer(upstream.normalize, info, new_id=new_id_factory())


STATE = web.AppKey("state", ProxyState)
REQUEST_ID = web.RequestKey("request_id", str)
