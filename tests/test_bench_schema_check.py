"""``python -m bench.schema_check`` runs and reports what chose the libraries (no figure is
judged): jsonschema-rs right on every draft 2020-12 probe, the proxy's healing right on
every shape and leaving cut text alone."""

from __future__ import annotations

from bench.schema_check import main


def test_the_comparison_runs_with_the_projects_own_libraries(capsys):
    assert main(["--number", "20", "--libraries", "jsonschema-rs"]) == 0
    out = capsys.readouterr().out
    tables = dict(part.split("\n", 1) for part in out.split("### ")[1:])
    drafts = [row for row in tables["Draft 2020-12"].splitlines() if row.startswith("| ")][2:]
    assert len(drafts) == 10
    assert all(row.endswith("| right |") for row in drafts), drafts
    heal_rows = [row for row in tables["Healing"].splitlines() if row.startswith("| ")][2:]
    shapes = [row for row in heal_rows if " ms |" not in row and " us |" not in row]
    # the proxy's column is the first after the shape, whichever compared libraries are installed
    proxy = [row.strip("| ").split(" | ")[1] for row in shapes]
    assert proxy[:-2] == ["right"] * (len(shapes) - 2)
    assert proxy[-2:] == ["leaves it", "leaves it"]  # cut in a string, cut after a member
    assert "| codex/exec_command | 12 |" in tables["The proxy's check (jsonschema-rs), per call"]
