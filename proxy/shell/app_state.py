"""What the shell keeps for the app's lifetime, under typed keys. Nothing here is per stream.

``app[STATE]`` is a ``Live``: its ``now`` is the running configuration's ``ProxyState``, which a
reload (proxy/shell/hangup.py) replaces as a whole. A request takes ``now`` once, at its
start, and keeps that state to its end, so a stream in flight finishes on the configuration it
started with while new requests get the new one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import ClientSession, web

from proxy.core.forwarding import Forwarding
from proxy.core.options import UpstreamOptions
from proxy.core.policy import ProtocolMode
from proxy.core.replicas import ReplicaPool
from proxy.core.routing import Router, Upstream
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.auth import ClientKeys
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
    # What every request asks of ``options``, made once per configuration rather than per
    # request: the mode of each client protocol, model_map and max_tokens_limit, the retries.
    modes: Mapping[str, ProtocolMode] = field(init=False)
    forwarding: Forwarding = field(init=False)
    retries: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "modes", self.options.protocol_modes())
        object.__setattr__(self, "forwarding", self.options.forwarding())
        object.__setattr__(self, "retries", self.options.retry_count())


@dataclass(slots=True)
class ProxyState:
    settings: Settings
    router: Router
    upstreams: Mapping[str, UpstreamConfig]
    session: ClientSession
    keys: ClientKeys | None = None  # inbound keys (auth.*); None: no authentication
    digest: str = ""  # the configuration's hash (proxy/shell/hangup.py)

    def upstream(self, name: str) -> UpstreamConfig:
        return self.upstreams[name]


@dataclass(slots=True)
class Live:
    """The running configuration's state; a reload replaces ``now``."""

    now: ProxyState


def config_digest(settings: Settings) -> str:
    """The configuration's hash, as loaded (file, environment, flags): what
    ``toolcall_proxy_config_info`` names, so that a reload shows where it took effect. The
    values behind ``api_key_env`` and the keys in key files are not part of it."""
    return hashlib.sha256(settings.model_dump_json().encode()).hexdigest()[:16]


STATE = web.AppKey("state", Live)
REQUEST_ID = web.RequestKey("request_id", str)
#: set once the response's head is prepared (its status can no longer change)
RESPONSE_STARTED = web.RequestKey("response_started", bool)
