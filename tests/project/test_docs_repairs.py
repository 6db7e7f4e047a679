"""docs/repairs.md's repair table documents exactly the kinds of the catalog in proxy/core/repairs.py.

Operators read a ``kind`` label off a metric and look it up in that table, so a kind added to
the catalog without a row (or a row left behind after a kind is gone) is a bug in the docs.
"""

from __future__ import annotations

import re
from pathlib import Path

from proxy.core.repairs import Repair

README = Path(__file__).parents[2] / "docs" / "repairs.md"
TABLE_HEADER = "| repair kind |"


def documented_kinds(readme: str) -> set[str]:
    """The kinds named in the first column of the repair tables, the stream's and the
    requests' (issue 23) (``kind:<dialect>`` as ``kind``)."""
    lines = readme.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(TABLE_HEADER)]
    kinds: set[str] = set()
    for start in starts:
        for line in lines[start + 2 :]:  # past the header and its --- row
            if not line.startswith("|"):
                break
            first_column = line.split("|")[1]
            kinds.update(name.partition(":")[0] for name in re.findall(r"`([^`]+)`", first_column))
    return kinds


def test_the_readme_repair_table_names_every_kind_of_the_catalog_and_no_other() -> None:
    documented = documented_kinds(README.read_text(encoding="utf-8"))
    catalog = {kind.value for kind in Repair}
    undocumented = sorted(catalog - documented)
    unknown = sorted(documented - catalog)
    assert (undocumented, unknown) == ([], []), (
        f"in proxy/core/repairs.py but missing from docs/repairs.md's repair table: {undocumented};"
        f" in docs/repairs.md's repair table but missing from proxy/core/repairs.py: {unknown}"
    )


def test_the_table_reader_sees_a_missing_row() -> None:
    """Guards the guard: dropping one row from the real docs/repairs.md makes its kinds undocumented."""
    readme = README.read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `empty-arguments` |"))
    assert Repair.EMPTY_ARGUMENTS not in documented_kinds(readme.replace(row + "\n", ""))
    assert Repair.EMPTY_ARGUMENTS in documented_kinds(readme)
    request_row = next(
        line for line in readme.splitlines() if line.startswith("| `developer-role` |")
    )
    assert Repair.DEVELOPER_ROLE not in documented_kinds(readme.replace(request_row + "\n", ""))


def test_the_argument_settings_are_documented_beside_their_kinds() -> None:
    """Issue 25: docs/repairs.md names each argument setting in its section, with its kinds."""
    readme = README.read_text(encoding="utf-8")
    section = readme.split("## Arguments that fit the tool", 1)[1].split("\n## ", 1)[0]
    for setting in ("heal_arguments", "coerce_arguments", "enforce_parallel_tool_calls"):
        assert f"`{setting}`" in section, setting
    for kind in ("args-schema-mismatch", "args-healed", "args-coerced", "parallel-call-dropped"):
        assert f"`{kind}" in section, kind
