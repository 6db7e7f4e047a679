"""The field streams of issue 24 items 2, 3, 4, 5, 6 and 11 (tests/fixtures/field/, their
provenance in its README), run whole through the core in every mode they reach, chat S1 and
S2 and both translate modes, and judged by the field report against streams.toml: each must
come out right (the strict checker has nothing to say, and a client reads what ``expect``
says)."""

from __future__ import annotations

import pytest

from tests.fixtures.field import report

ITEMS = {2, 3, 4, 5, 6, 11}
CASES = [
    pytest.param(stream, mode, id=f"{stream.file}-{mode}")
    for stream in report.load()
    if stream.item in ITEMS
    for mode in stream.modes
]


@pytest.mark.parametrize(("stream", "mode"), CASES)
def test_a_field_stream_comes_out_right(stream: report.Stream, mode: str) -> None:
    assert report.judge(stream, mode, report.run(stream, mode)) == []
