"""/-/metrics as a test reads it: the samples a scrape returns, and one sample's value by name and labels."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

Proxy = TestClient[web.Request, web.Application]


async def scrape(proxy: Proxy) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    resp = await proxy.get("/-/metrics")
    assert resp.status == 200
    samples = {}
    for family in text_string_to_metric_families(await resp.text()):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))
