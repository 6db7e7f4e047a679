"""``python -m bench.arguments`` runs and reports (no figure is judged): a row for each shape,
paired on/off, and the first argument byte held to the call's end under heal_arguments."""

from __future__ import annotations

from bench.arguments import first_byte_rows, main


def test_the_report_runs(capsys):
    assert main(["--repeat", "1", "--streams", "1"]) == 0
    out = capsys.readouterr().out
    for shape in ("manycalls", "toolcall", "content", "plain"):
        assert f"| {shape} |" in out


def test_holding_sends_the_first_argument_byte_at_the_calls_end():
    streamed, held = first_byte_rows(chunks=10)
    assert streamed["event"] == 1  # the opening's own "{"
    # the call's last argument delta is the third event from the end (finish, [DONE])
    assert held["event"] == held["of"] - 3
