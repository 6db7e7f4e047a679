"""SIGHUP: the configuration file read again and, when it is valid, applied without cutting a
stream (issue 28 item 3).

The file is loaded as at start (the same path and command-line flags; ``load``). When it is
invalid, the running configuration stays and one line names the key
(``toolcall_proxy_config_reloads_total{result="invalid"}``). When it is valid:

* a single process (``Reloader``) builds the state from the new settings as at start
  (proxy/shell/app.py ``build_routes``: the upstreams and the router, the inbound keys read again)
  and puts it in place at once; a request keeps the state it started with to its end
  (proxy/shell/app_state.py), so the streams in flight finish on the old configuration.
  An upstream whose replicas and their rules are unchanged keeps its pool (their health and
  requests in flight, which ``max_concurrent_requests`` counts), and one whose
  address and template setting are unchanged keeps what its template was read to need.
* with workers the supervisor (proxy/shell/supervisor.py) starts new workers with the new
  settings on the same socket and, once they serve, drains the old ones as SIGTERM does.

What cannot change without a restart is logged as ignored and kept as it runs: the listening
address and the number of workers (``RESTART_KEYS``), and in a single process also what its
HTTP server was started with (``SERVER_KEYS``). The environment is the process's own: the
``TOOLCALL_PROXY_*`` overrides and the values behind ``api_key_env`` are those it started
with, whatever changed in the shell since. The keys in ``auth.api_keys_file`` are read again,
so inbound keys rotate without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final

from aiohttp import web
from pydantic import BaseModel

from proxy.core.errors import ConfigError
from proxy.settings import Settings
from proxy.shell.app import build_routes, client_keys
from proxy.shell.app_state import STATE, ProxyState, UpstreamConfig, config_digest
from proxy.shell.metrics import METRICS
from proxy.shell.template_probe import read_until_answered, reads_template

log = logging.getLogger("toolcall_proxy")

Loader = Callable[[], Settings]

#: applied only by a restart, in every mode
RESTART_KEYS: Final = ("host", "port", "workers")
#: what a single process's HTTP server and app were started with (new workers take them)
SERVER_KEYS: Final = (
    "timeouts.request_headers",
    "timeouts.shutdown_grace",
    "limits.max_header_bytes",
    "limits.max_request_body_bytes",
)
APPLIED: Final = "applied"
INVALID: Final = "invalid"


def _get(settings: BaseModel, key: str) -> Any:
    value: Any = settings
    for part in key.split("."):
        value = getattr(value, part)
    return value


def _with(model: BaseModel, key: str, value: Any) -> Any:
    """``model`` with the dotted ``key`` set to ``value`` (frozen models: copies)."""
    head, _, rest = key.partition(".")
    inner = value if not rest else _with(getattr(model, head), rest, value)
    return model.model_copy(update={head: inner})


def load(loader: Loader, running: Settings, restart_keys: Sequence[str]) -> Settings | None:
    """The settings the file gives now, with what needs a restart kept as it runs (logged);
    None when they are invalid (logged, one line naming the key)."""
    try:
        new = loader()
    except ConfigError as exc:
        log.error("reload: config error: %s; keeping the running configuration", exc.message)
        return None
    changed = [key for key in restart_keys if _get(new, key) != _get(running, key)]
    if changed:
        log.warning(
            "reload: %s changed; ignored until the proxy restarts", ", ".join(sorted(changed))
        )
        for key in changed:
            new = _with(new, key, _get(running, key))
    return new


def rebuilt(settings: Settings, previous: ProxyState) -> ProxyState:
    """The state of ``settings``, built as at start; what an unchanged upstream counts and
    has read carries over (the module's docstring)."""
    router, upstreams = build_routes(settings)
    kept = {name: _carried(u, previous.upstreams.get(name)) for name, u in upstreams.items()}
    return ProxyState(
        settings,
        router,
        kept,
        previous.session,
        client_keys(settings),
        config_digest(settings),
    )


_POOL_KEYS = (
    "url",
    "urls",
    "max_concurrent_requests",
    "affinity",
    "eject_seconds",
    "max_eject_seconds",
    "health_path",
    "health_interval",
)


def _same(a: UpstreamConfig, b: UpstreamConfig, *keys: str) -> bool:
    return a.options.model_dump(include=set(keys)) == b.options.model_dump(include=set(keys))


def _carried(new: UpstreamConfig, old: UpstreamConfig | None) -> UpstreamConfig:
    if old is None:
        return new
    # the same replicas under the same rules keep their pool: its health, and the requests in
    # flight that max_concurrent_requests counts
    if _same(new, old, *_POOL_KEYS):
        new = replace(new, replicas=old.replicas)
    if _same(new, old, "url", "urls", "template", "api_key_env", "normalize"):
        new = replace(new, template=old.template)
    return new


class Reloader:
    """A single process's SIGHUP: ``install`` it on the app (``on_startup``, ``on_cleanup``)."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader
        self._probes: set[asyncio.Task[None]] = set()

    def install(self, app: web.Application) -> None:
        app.on_startup.append(self._listen)
        app.on_cleanup.append(self._stop_probes)

    async def _listen(self, app: web.Application) -> None:
        if hasattr(signal, "SIGHUP"):  # not on Windows
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.reload, app)

    async def _stop_probes(self, app: web.Application) -> None:
        for probe in self._probes:
            probe.cancel()
        await asyncio.gather(*self._probes, return_exceptions=True)

    def reload(self, app: web.Application) -> None:
        live, metrics = app[STATE], app[METRICS]
        running = live.now
        settings = load(self._loader, running.settings, RESTART_KEYS + SERVER_KEYS)
        if settings is None:
            metrics.config_reloads.labels(INVALID).inc()
            return
        state = rebuilt(settings, running)
        live.now = state
        metrics.config_loaded(state.digest)
        metrics.config_reloads.labels(APPLIED).inc()
        logging.getLogger().setLevel(settings.log_level.upper())
        for name, upstream in state.upstreams.items():
            old = running.upstreams.get(name)
            if (old is None or upstream.template is not old.template) and reads_template(upstream):
                self._probe(state, upstream)
        log.info("reload: configuration applied (hash %s)", state.digest)

    def _probe(self, state: ProxyState, upstream: UpstreamConfig) -> None:
        """An upstream new to this configuration: its template read as at start."""
        task = asyncio.get_running_loop().create_task(
            read_until_answered(
                state.session, upstream.route.base_url, upstream.authorization, upstream.template
            )
        )
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)
