"""Every stream that offers tools builds an extractor with every dialect, so its set-up is a
per-request cost (bench --per-request): the marker tables are built once per configuration,
and what is left per stream is little more than making the dialect objects themselves."""

from __future__ import annotations

from proxy.core.markup import DIALECTS, build_extractor, check_names
from tests.support.cpu import least_cpu_seconds

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def test_an_extractor_of_every_dialect_costs_little_more_than_its_dialects():
    names = check_names(["auto"])
    assert build_extractor(names, TOOLS) is not None

    def extractors() -> None:
        for _ in range(2000):
            build_extractor(names, TOOLS)

    def dialects() -> None:
        for _ in range(2000):
            [DIALECTS[name](TOOLS) for name in names]

    ratio = least_cpu_seconds(extractors, 5) / least_cpu_seconds(dialects, 5)
    # 2.8 with the tables shared, 5.9 when each extractor built its own
    assert ratio < 4.2, ratio
