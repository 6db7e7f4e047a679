"""The bench's protocol dimension: Responses and Messages streams, read from raw bytes, and a
tiny run over every protocol and mode (no figure is judged but that each stream was whole)."""

from __future__ import annotations

import json

import pytest

from bench.cli import main
from bench.native_shapes import native_templates
from bench.protocols import RULES, EventReader, request

CHUNKS = 5


def _native(protocol: str, shape: str) -> tuple[list[bytes], list[int]]:
    """The upstream's events of a native stream, with stamps 1..CHUNKS filled in."""
    stamps: list[bytes] = []
    events = []
    for t in native_templates(protocol, f"bench-{shape}-{CHUNKS}-0"):
        if t.fresh:
            stamps.append(b"T%016d" % (len(stamps) + 1))
        events.append(t.event(stamps))
    return events, list(range(1, CHUNKS + 1))


def _read(protocol: str, reads: list[bytes]) -> tuple[list[int], str | None]:
    reader = EventReader(RULES[protocol])
    found = [s for data in reads for s in reader.feed(data)]
    return found, reader.error(CHUNKS)


@pytest.mark.parametrize("protocol", ["responses", "messages"])
@pytest.mark.parametrize("shape", ["content", "toolcall", "hermes"])
def test_event_reader_finds_each_stamp_once_however_the_stream_is_cut(protocol, shape):
    events, stamps = _native(protocol, shape)
    body = b"".join(events)
    if protocol == "responses":  # the .done events and response.completed repeat the text
        assert body.count(b"T%016d" % 1) == (4 if shape == "toolcall" else 5)
    assert _read(protocol, [body]) == (stamps, None)
    assert _read(protocol, [body[i : i + 1] for i in range(len(body))]) == (stamps, None)
    assert _read(protocol, events) == (stamps, None)


def test_event_reader_reads_crlf_events():
    events, stamps = _native("messages", "toolcall")
    assert _read("messages", [e.replace(b"\n", b"\r\n") for e in events]) == (stamps, None)


def test_event_reader_joins_a_stamp_cut_in_two_argument_deltas():
    # LiteLLM's Responses bridge cuts " T0000000000000001" into " T00000000" and "00000001".
    events, stamps = _native("responses", "toolcall")
    first = next(i for i, e in enumerate(events) if b"T%016d" % 1 in e)
    halves = [
        events[first].replace(b"T%016d" % 1, b"T00000000"),
        events[first].replace(b" T%016d" % 1, b"00000001"),
    ]
    assert _read("responses", [*events[:first], *halves, *events[first + 1 :]]) == (stamps, None)


@pytest.mark.parametrize(
    ("protocol", "end", "failed"),
    [
        (
            "responses",
            b"response.completed",
            b'event: response.failed\ndata: {"type":"response.failed","response":{}}\n\n',
        ),
        (
            "messages",
            b"message_stop",
            b'event: error\ndata: {"type":"error","error":{"type":"api_error"}}\n\n',
        ),
    ],
)
def test_event_reader_tells_a_failed_a_cut_and_a_lossy_stream(protocol, end, failed):
    events, stamps = _native(protocol, "content")
    ending = next(i for i, e in enumerate(events) if end in e)
    name = "response.failed" if protocol == "responses" else "error event"
    assert _read(protocol, [*events[:ending], failed])[1] == name
    assert _read(protocol, events[:ending]) == (stamps, f"no {end.decode()}")
    lossy = [e for e in events if b"T%016d" % 3 not in e or end in e]
    assert _read(protocol, lossy)[1] == "stamps lost"


def test_requests_offer_the_tool_in_each_protocols_form():
    responses = request("responses", "bench-toolcall-1-0", tools=True)
    messages = request("messages", "bench-toolcall-1-0", tools=True)
    assert responses["tools"][0]["name"] == messages["tools"][0]["name"] == "get_weather"
    assert "parameters" in responses["tools"][0]
    assert "input_schema" in messages["tools"][0]
    assert messages["max_tokens"] > 0
    assert "tools" not in request("messages", "bench-plain-1-0", tools=False)


def test_bench_measures_every_protocol_and_mode_with_whole_streams(tmp_path, capsys):
    # Each load ends after 2 whole streams: what is asserted is that every stream of every
    # protocol arrived complete with all its stamps (arguments JSON-escaped in the toolcall
    # shape's events), never how fast.
    argv = ["--targets", "proxy,bare", "--protocols", "chat,responses,messages"]
    argv += ["--shapes", "toolcall,hermes", "--loads", "1x0", "--idle", "", "--reps", "1"]
    argv += ["--duration", "3", "--max-requests", "2", "--chunks", "10", "--warmup", "0"]
    assert main([*argv, "--out", str(tmp_path)]) == 0

    proxy, native, bare = "toolcall-proxy", "toolcall-proxy native", "bare aiohttp"
    serving = {
        "chat": {"direct", proxy, bare},
        "responses/translate": {"direct", proxy},
        "messages/translate": {"direct", proxy},
        "responses/native": {"direct", native, bare},
        "messages/native": {"direct", native, bare},
    }
    [result_file] = tmp_path.glob("*.json")
    result = json.loads(result_file.read_text())
    assert {(c["protocol"], c["shape"], c["target"]) for c in result["cells"]} == {
        (protocol, shape, target)
        for protocol, targets in serving.items()
        for shape in ("toolcall", "hermes")
        for target in targets
    }
    for cell in result["cells"]:
        assert (cell["completed"], cell["errors"]) == (2, {}), cell
        assert cell["chunks"] == 2 * 10, cell
        assert cell["ttfb_ms"]["p50"] > 0, cell
    for row in result["summary"]:
        assert row["chunks_per_s"] > 0, row
        assert (row["cpu_s_per_1k"] is None) == (row["target"] == "direct"), row

    table = capsys.readouterr().out
    assert "#### responses/native: toolcall" in table
    assert "| 1 x 0 ms | direct (chat stream) |" in table
    assert f"| 1 x 0 ms | {native} |" in table
    bridges = table.split("Translating, CPU against the chat rewrite")[1]
    assert f"| {proxy} | toolcall | 1 x 0 ms |" in bridges
    logs = tmp_path / (result_file.stem + "-logs")
    assert 'responses = "native"' in (logs / f"{native}.toml").read_text()
    assert "native" not in (logs / f"{proxy}.toml").read_text()
