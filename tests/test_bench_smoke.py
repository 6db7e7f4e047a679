"""The benchmark code runs and reports; it is not a benchmark itself (no figure is judged)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import core, report
from bench.cli import main
from bench.stamps import StampScanner


def test_stamp_scanner_finds_each_stamp_once_however_the_stream_is_cut():
    stream = b"".join(core.stream("toolcall", chunks=5))
    whole = StampScanner().feed(stream)
    scanner = StampScanner()
    by_byte = [s for i in range(len(stream)) for s in scanner.feed(stream[i : i + 1])]
    assert len(whole) == 5
    assert by_byte == whole


def test_quick_run_measures_direct_and_bare_proxy_and_writes_a_table(tmp_path, capsys):
    # Each load ends after 3 whole streams, well before its time is up: what is asserted is
    # that every stream arrived complete with all its stamps, never how fast.
    argv = ["--quick", "--targets", "bare", "--shapes", "content,hermes", "--loads", "1x0,2x20"]
    argv += ["--duration", "3", "--max-requests", "3", "--chunks", "20", "--warmup", "0"]
    assert main([*argv, "--out", str(tmp_path)]) == 0

    table = capsys.readouterr().out
    assert "| 2 x 20 ms | bare aiohttp |" in table
    [result_file] = tmp_path.glob("*.json")
    result = json.loads(result_file.read_text())
    assert {(c["shape"], c["target"], c["concurrency"]) for c in result["cells"]} == {
        (shape, target, streams)
        for shape in ("content", "hermes")
        for target in ("direct", "bare aiohttp")
        for streams in (1, 2)
    }
    for cell in result["cells"]:
        assert (cell["completed"], cell["errors"]) == (3, {}), cell
        assert cell["chunks"] == 3 * 20, cell
    assert all(r["cpu_s_per_1k"] is not None for r in result["summary"] if r["target"] != "direct")


def test_core_bench_prints_a_figure_for_every_shape_and_cut(capsys):
    argv = ["--shapes", "content,hermes", "--streams", "1", "--repeat", "1", "--lengths", ""]
    assert core.main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[1:]] == ["| content", "| hermes"]
    for row in rows[1:]:
        figures = [float(cell) for cell in row.strip("| ").split(" | ")[1:]]
        assert len(figures) == len(core.READS)
        assert all(f > 0 for f in figures)


def test_core_bench_prints_a_figure_for_every_length_and_cut():
    lengths = {"longcall": (3, 30), "manycalls": (2, 20)}
    out = core.length_table(["longcall", "manycalls"], repeat=1, lengths=lengths)
    rows = [row.strip("| ").split(" | ") for row in out.splitlines()[2:]]
    assert [(row[0], row[1]) for row in rows] == [
        ("longcall", "3"),
        ("longcall", "30"),
        ("manycalls", "2"),
        ("manycalls", "20"),
    ]
    for row in rows:
        figures = [float(cell) for cell in row[3:]]
        assert len(figures) == len(core.READS)
        assert all(f >= 0 for f in figures)


def test_per_request_run_measures_both_answers_and_the_collector(tmp_path, capsys):
    # Only the per-request load (--loads ''), 1 s each; what is asserted is that every
    # answer arrived whole and each target's CPU was read, never how fast.
    argv = ["--quick", "--loads", "", "--per-request", "2", "--targets", "bare,proxy+gc"]
    argv += ["--duration", "1", "--reps", "1", "--warmup", "0", "--out", str(tmp_path)]
    assert main(argv) == 0

    table = capsys.readouterr().out
    assert "#### Per request (2 clients, 1-chunk answers)" in table
    assert "| stream | bare aiohttp |" in table
    assert "| json | toolcall-proxy+gc |" in table
    assert "toolcall-proxy+gc-gc.json:" in table  # the collector's pauses, summed
    [result_file] = tmp_path.glob("*.json")
    result = json.loads(result_file.read_text())
    cells = result["per_request"]
    assert {(c["answer"], c["target"]) for c in cells} == {
        (answer, target)
        for answer in ("stream", "json")
        for target in ("direct", "bare aiohttp", "toolcall-proxy+gc")
    }
    for cell in cells:
        assert cell["completed"] > 0, cell
        assert cell["errors"] == {}, cell
        assert cell["upstream_cpu_s"] is not None, cell
    rows = result["per_request_summary"]
    assert all(r["cpu_ms"] > 0 for r in rows if r["target"] != "direct")


def test_the_workers_table_sets_each_load_against_one_worker_on_the_same_load() -> None:

    def row(target: str, delay: int, rate: float, cpu: float) -> dict[str, object]:
        return {
            "protocol": "chat",
            "shape": "content",
            "concurrency": 100,
            "delay_ms": delay,
            "target": target,
            "chunks_per_s": rate,
            "cpu_s_per_1k": cpu,
        }

    rows = [
        row(report.PROXY, 0, 60000, 0.015),
        row(report.PROXY + " (2 workers)", 0, 66000, 0.016),
        row(report.PROXY, 20, 4900, 0.07),  # a throttled load is not the base of an unthrottled one
        row(report.PROXY + " (2 workers)", 20, 4900, 0.08),
    ]
    table = report.workers_table(rows)
    assert "| content 100 x 0 ms | toolcall-proxy (2 workers) | 66000 | 1.10x |" in table
    assert "4900" not in table


def test_the_core_pair_loads_both_packages_side_by_side_and_tables_each_shape(tmp_path):
    # Another tree's proxy package (a copy of this one, marked) is loaded beside this one's in
    # the one process, each run under its own modules; this tree's modules are back after.
    import shutil
    import sys

    import proxy
    from bench.core_pair import load, pair_table

    shutil.copytree(
        Path(core.__file__).parents[1] / "proxy",
        tmp_path / "proxy",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (tmp_path / "proxy" / "marked.py").write_text("MARK = 1\n")

    def marked() -> bool:
        import importlib.util

        return importlib.util.find_spec("proxy.marked") is not None

    other, found = load("copy", tmp_path, marked)
    assert found
    assert str(other.modules["proxy"].__file__).startswith(str(tmp_path))
    assert sys.modules["proxy"] is proxy
    table = pair_table(str(tmp_path), ["plain", "content"], streams=1, rounds=2)
    assert [line.split(" | ")[0] for line in table.splitlines()[-2:]] == ["| plain", "| content"]
    assert table.splitlines()[-1].count("→") == 3
    assert sys.modules["proxy"] is proxy


def test_several_revisions_are_paired_in_the_same_rounds_each_against_the_first(tmp_path):
    # bench.core --checkout A,B: each revision and this tree against the first, one column
    # a revision, one row a shape and read
    import shutil
    import sys

    import proxy
    from bench.core_pair import revs_table

    for name in ("a", "b"):
        shutil.copytree(
            Path(core.__file__).parents[1] / "proxy",
            tmp_path / name / "proxy",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    table = revs_table([str(tmp_path / "a"), str(tmp_path / "b")], ["plain"], 1, 2)
    lines = table.splitlines()
    assert lines[2].endswith(f"| {tmp_path / 'b'} | this tree |")
    assert [line.split(" | ")[:2] for line in lines[-3:]] == [
        ["| plain", read] for read in ("1 event", "10 events", "1500 bytes")
    ]
    assert sys.modules["proxy"] is proxy
