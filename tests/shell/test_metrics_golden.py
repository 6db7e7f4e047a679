"""Issue 29 item 2: the metrics' children resolved once per upstream and route, not per
request, and the exposition the same as before for the same traffic: the golden files beside
this one were written by the code before the change (main at ec28f34) from the traffic of
tests/support/metrics_traffic.py, and are compared byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.shell.metrics import Metrics
from tests.support.metrics_traffic import UPSTREAMS, exposition, record

HERE = Path(__file__).parent


@pytest.mark.parametrize("form", ["prometheus", "openmetrics"])
def test_the_same_traffic_gives_the_same_exposition_as_before(form: str) -> None:
    metrics = Metrics(UPSTREAMS)
    record(metrics)
    expected = (HERE / f"metrics-golden.{form}.txt").read_text()
    assert exposition(metrics, openmetrics=form == "openmetrics") == expected
