"""Every reference in the repository resolves inside it: each quirk number the code, the tests
and the docs cite (``Q14``, ``N2``, ``K6``, ``R3``, ``M1``) is an entry of docs/quirks.md, no
file points into a folder outside the repository, and every relative Markdown link leads to a
file that exists and, with a ``#fragment``, to a heading or anchor in it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUIRKS = ROOT / "docs" / "quirks.md"
# A quirk number on its own: not inside a word, a path or a version ("MiniMax-M2", "V3.1").
QUIRK = re.compile(r"(?<![\w\-./])([QNKRM])(\d{1,2})(?![\w.])")
GOLDEN_NAME = re.compile(r"\bq(\d\d)-[a-z]")
ENTRY = re.compile(r'^### ([QNKRM]\d+)$|<a id="([qnkrm]\d+)"></a>', re.MULTILINE)
OUTSIDE = re.compile(r"(?<![\w.])(?:research|shared)/")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
SCANNED = ("proxy", "tests", "docs", "bench", "config", "deploy")


def tracked(*suffixes: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    paths = [ROOT / name for name in listed]
    return [p for p in paths if p.suffix in suffixes and p.is_file()]


def cited_files() -> list[Path]:
    files = tracked(".py", ".md", ".toml", ".json", ".yaml", ".yml", ".mjs")
    top = [p for p in files if p.parent == ROOT]
    below = [p for p in files if p.relative_to(ROOT).parts[0] in SCANNED]
    return [p for p in top + below if p != Path(__file__).resolve()]  # this file cites on purpose


def entries() -> set[str]:
    return {(a or b).upper() for a, b in ENTRY.findall(QUIRKS.read_text())}


def citations(text: str) -> set[str]:
    cited = {f"{letter}{int(number)}" for letter, number in QUIRK.findall(text)}
    return cited | {f"Q{int(number)}" for number in GOLDEN_NAME.findall(text)}


def test_every_quirk_number_cited_is_an_entry_of_the_catalogue() -> None:
    known = entries()
    missing = {
        f"{path.relative_to(ROOT)}: {number}"
        for path in cited_files()
        for number in citations(path.read_text(errors="replace")) - known
    }
    assert not missing, sorted(missing)


def test_the_catalogue_numbers_each_series_without_a_gap() -> None:
    known = entries()
    for letter, last in {"Q": 34, "N": 9, "K": 15, "R": 10, "M": 6}.items():
        assert {n for n in known if n[0] == letter} == {f"{letter}{i}" for i in range(1, last + 1)}


def test_the_citation_reader_sees_a_number_and_skips_names_and_versions() -> None:
    """Guards the guard: a stray number would be caught, a model name would not."""
    assert citations("(quirks.md Q29 and K6), R10: see M4; case q07-id-empty") == {
        "Q29",
        "K6",
        "R10",
        "M4",
        "Q7",
    }
    assert citations("MiniMax-M2, DeepSeek V3.1, Q12x, docs/R1, n2-two-choices") == set()
    assert "Q35" in citations("a quirk Q35 that is no entry") - entries()


def test_no_file_points_outside_the_repository() -> None:
    outside = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in cited_files()
        if path.suffix != ".json"
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not outside, outside


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation gone, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    seen: dict[str, int] = {}
    names = set(ANCHOR.findall(text))
    for heading in HEADING.findall(text):
        base = slug(heading)
        names.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return names


@pytest.mark.parametrize(
    "doc", tracked(".md"), ids=lambda p: str(p.relative_to(ROOT)) if isinstance(p, Path) else p
)
def test_every_relative_link_of_a_document_resolves(doc: Path) -> None:
    broken = []
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.DOTALL)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target}: no such heading or anchor in {file.name}")
    assert not broken, broken
