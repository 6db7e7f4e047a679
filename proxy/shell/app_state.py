"""What the shell keeps for the app's lifetime, under typed keys. Nothing here is per stream."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import ClientSession, web

from proxy.core.options import UpstreamOptions
from proxy.core.replicas import ReplicaPool
from proxy.core.routing import Router, Upstream
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.template_probe import TemplateState


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    route: Upstream
    options: UpstreamSettings
    authorization: str | None  # "Bearer <key>" from the environment, never from the file
    normalize: UpstreamOptions | None  # None: this upstream is pure passthrough (app.py)
    # its replicas (one for a single url): requests in flight against
    # max_concurrent_requests, each one's health (proxy/core/replicas.py)
    replicas: ReplicaPool
    template: TemplateState  # what its chat template needs (proxy/shell/template_probe.py)


@dataclass(slots=True)
class ProxyState:
    settings: Settings
    router: Router
    upstreams: Mapping[str, UpstreamConfig]
    session: ClientSession

    def upstream(self, name: str) -> UpstreamConfig:
        return self.upstreams[name]


STATE = web.AppKey("state", ProxyState)
REQUEST_ID = web.RequestKey("request_id", str)
#: set once the response's head is prepared (its status can no longer change)
RESPONSE_STARTED = web.RequestKey("response_started", bool)
