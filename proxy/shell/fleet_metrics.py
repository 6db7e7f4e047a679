"""``/-/metrics`` with several workers: the whole proxy's figures, whichever worker is scraped.

Each worker keeps its own registry (:mod:`proxy.shell.metrics`, unchanged) and also serves it,
in OpenMetrics text, on a private unix socket in the runtime directory that the supervisor
creates (``worker-<n>.sock``, mode 0700 directory). The public ``/-/metrics`` of the worker a
scraper reaches reads every worker's exposition, parses it with prometheus-client's own
OpenMetrics parser, and merges it:

* the proxy's own families (``toolcall_proxy_*``): counters, histograms and gauges are summed
  per label set (``streams_open`` is then the streams open in the whole proxy); a counter's
  ``_created`` is the earliest worker's.
* per-process families (``process_*``, ``python_*``: CPU, memory, file descriptors, GC) are
  kept apart, each sample labelled ``worker="<n>"``, since a sum of them would mislead.

A worker that does not answer within ``PEER_TIMEOUT`` (being restarted, say) is left out of
that scrape and logged; ``toolcall_proxy_workers_scraped`` says how many were merged. A worker
that crashed and was started again counts from zero, so the proxy's totals drop by what it had
counted, which Prometheus' ``rate()`` reads as a counter reset, as for a restarted process.

A reload replaces every worker (issue 28 item 3), and its totals must not drop then: a worker
that drains and exits writes its final counts (``<name>.om``, written whole, then renamed into
place, once its last request ended and before its socket goes), and from then on the merge
reads that file instead of its socket, so what it counted stays in the totals. Only counters
and histograms are kept from it (its gauges and per-process series ended with it). The
supervisor's own counts (``toolcall_proxy_config_reloads_total``) are such a file too. The
peers are the sockets and files in the runtime directory: a worker's name there is
``worker-<generation>-<n>``.

OpenMetrics rather than the Prometheus text format between workers because it keeps a counter's
``_created`` sample inside its family, where the merge can tell it from a value to add.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

from aiohttp import ClientError, ClientSession, ClientTimeout, UnixConnector, hdrs, web
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.openmetrics import exposition as openmetrics_exposition
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.registry import Collector

from proxy.shell.metrics import METRICS

log = logging.getLogger("toolcall_proxy.metrics")

PRIVATE_PATH: Final = "/metrics"
PEER_TIMEOUT: Final = 2.0
PER_PROCESS: Final = ("process_", "python_")
CREATED: Final = "_created"

# prometheus-client ships these without annotations.
_generate_openmetrics = cast(
    Callable[[CollectorRegistry], bytes], openmetrics_exposition.generate_latest
)
_parse_openmetrics = cast(
    Callable[[str], Iterable[Metric]], openmetrics_parser.text_string_to_metric_families
)


SOCKET: Final = ".sock"
FINAL: Final = ".om"
#: the families a final count keeps (gauges and per-process series end with their process)
KEPT_FINAL: Final = frozenset({"counter", "histogram"})


@dataclass(frozen=True, slots=True)
class Fleet:
    """Where this worker stands among its siblings: its number (1..N, the access log's),
    its name in the runtime directory (``worker-<generation>-<n>``), and that directory."""

    worker: int
    name: str
    runtime_dir: Path

    def socket_path(self, name: str | None = None) -> Path:
        return self.runtime_dir / f"{name or self.name}{SOCKET}"

    def write_final(self, registry: CollectorRegistry) -> None:
        """This worker's final counts, for the merge once it is gone (the module's docstring)."""
        write_whole(self.runtime_dir / f"{self.name}{FINAL}", _generate_openmetrics(registry))

    async def handle_metrics(self, request: web.Request) -> web.Response:
        own = _generate_openmetrics(request.app[METRICS].registry).decode()
        finals = {p.stem: p for p in self.runtime_dir.glob(f"*{FINAL}")}
        peers = sorted(
            p.stem
            for p in self.runtime_dir.glob(f"*{SOCKET}")
            if p.stem != self.name and p.stem not in finals
        )
        fetched = await asyncio.gather(*(self._fetch(name) for name in peers))
        texts = [(self.worker, own)] + [
            (_number(name), text) for name, text in zip(peers, fetched, strict=True) if text
        ]
        kept = [text for path in finals.values() if (text := _read(path)) is not None]
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Merged([*merge(texts, kept), _scraped(len(texts))]))
        encode, content_type = choose_encoder(request.headers.get(hdrs.ACCEPT, ""))
        return web.Response(body=encode(registry), headers={hdrs.CONTENT_TYPE: content_type})

    async def _fetch(self, worker: str) -> str | None:
        path = self.socket_path(worker)
        try:
            async with (
                ClientSession(
                    connector=UnixConnector(str(path)),
                    timeout=ClientTimeout(total=PEER_TIMEOUT),
                ) as session,
                session.get(f"http://worker{PRIVATE_PATH}") as resp,
            ):
                resp.raise_for_status()
                return await resp.text()
        except (ClientError, OSError, TimeoutError) as exc:
            log.warning("metrics: worker %s did not answer on %s: %r", worker, path, exc)
            return None


def exposition(registry: CollectorRegistry) -> bytes:
    """``registry`` in OpenMetrics text, as the workers exchange it."""
    return _generate_openmetrics(registry)


def _number(name: str) -> int:
    """A worker's number (1..N) from its name, ``worker-<generation>-<n>``."""
    return int(name.rsplit("-", 1)[1])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # the runtime directory went with the supervisor
        return None


def write_whole(path: Path, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all for a reader (written aside, renamed)."""
    aside = path.with_name(path.name + ".tmp")
    aside.write_bytes(data)
    aside.replace(path)


def private_metrics_app(registry: CollectorRegistry) -> web.Application:
    """What a worker serves its siblings on its unix socket: its own registry, OpenMetrics."""

    async def handle(request: web.Request) -> web.Response:
        return web.Response(
            body=_generate_openmetrics(registry),
            headers={hdrs.CONTENT_TYPE: openmetrics_exposition.CONTENT_TYPE_LATEST},
        )

    app = web.Application()
    app.router.add_get(PRIVATE_PATH, handle)
    return app


def merge(expositions: Sequence[tuple[int, str]], finals: Sequence[str] = ()) -> list[Metric]:
    """One family per name from each worker's OpenMetrics text, and the counters and
    histograms of the ``finals`` of workers that exited (see the module docstring)."""
    families: dict[str, Metric] = {}
    series: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], _Series]] = {}
    parsed = [(worker, list(_parse_openmetrics(text))) for worker, text in expositions]
    for text in finals:
        kept = [
            f
            for f in _parse_openmetrics(text)
            if f.type in KEPT_FINAL and not f.name.startswith(PER_PROCESS)
        ]
        parsed.append((0, kept))
    for worker, found in parsed:
        for family in found:
            if family.name not in families:
                families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
                series[family.name] = {}
            merged = series[family.name]
            for sample in family.samples:
                labels = dict(sample.labels)
                if sample.name.startswith(PER_PROCESS):
                    labels["worker"] = str(worker)
                key = (sample.name, tuple(sorted(labels.items())))
                known = merged.get(key)
                if known is None:
                    merged[key] = _Series(sample.name, labels, sample.value)
                elif sample.name.endswith(CREATED):
                    known.value = min(known.value, sample.value)
                else:
                    known.value += sample.value
    for name, family in families.items():
        for one in series[name].values():
            family.add_sample(one.name, one.labels, one.value)
    return list(families.values())


class _Series:
    __slots__ = ("labels", "name", "value")

    def __init__(self, name: str, labels: dict[str, str], value: float) -> None:
        self.name = name
        self.labels = labels
        self.value = value


def _scraped(count: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "toolcall_proxy_workers_scraped",
        "Workers whose metrics this scrape merged (the others did not answer in time).",
        value=count,
    )


class _Merged(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)
