"""The access log as a test reads it: the JSON records the proxy logged, and the one a request left."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.shell.accesslog import ACCESS_LOGGER


def access_records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.access for r in caplog.records if r.name == ACCESS_LOGGER]  # type: ignore[attr-defined]


async def logged(caplog: pytest.LogCaptureFixture, count: int = 1) -> list[dict[str, Any]]:
    """The access records once ``count`` are there: a request is logged just after its last byte."""
    for _ in range(100):
        if len(access_records(caplog)) >= count:
            break
        await asyncio.sleep(0.02)
    return access_records(caplog)
