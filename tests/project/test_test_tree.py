"""The test tree holds together.

- A test module is never imported: what a second module needs lives in tests/support/ (or the
  conftest, or a helper module beside the tests that use it), so that moving or renaming a
  test breaks no other one.
- Every ``tests/...`` path that the code and the docs cite exists, so that a comment saying
  which test checks something leads to it after the tree moves.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("proxy", "docs", "bench", "config", "README.md", "CONTRIBUTING.md", "Makefile")
# paths in other projects' trees, cited as the source of a fact (vLLM's parser tests,
# llama.cpp's chat tests)
FOREIGN = ("tests/tool_parsers/", "tests/test-chat.cpp")
# a path: "tests/" and what a path can hold; a "<" right after it marks a pattern
# (``tests/core/markup/test_<name>.py``)
CITED = re.compile(r"(?<![\w./-])(tests/[\w./*-]*)(<?)")


def python_files(*tops: str) -> list[Path]:
    return [
        path
        for top in tops
        for path in sorted((ROOT / top).rglob("*.py"))
        if "node_modules" not in path.parts
    ]


def imported_modules(path: Path) -> set[str]:
    """Every ``tests.`` module the file imports, a name imported from a package included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] == "tests"}


def is_test_module(name: str) -> bool:
    return (ROOT / Path(*name.split("."))).with_suffix(".py").is_file() and name.split(".")[
        -1
    ].startswith("test_")


def test_no_module_imports_a_test_module() -> None:
    offenders = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in python_files("tests", "bench")
        for name in imported_modules(path)
        if is_test_module(name)
    }
    assert offenders == set(), "move what they share into tests/support/"


def test_the_import_check_sees_a_test_module_imported(tmp_path: Path) -> None:
    module = tmp_path / "test_example.py"
    module.write_text(
        "from tests.core.test_bridge import translate\n"
        "from tests.core import test_sse\n"
        "from tests.support.normalizer import run\n"
    )
    found = {name for name in imported_modules(module) if is_test_module(name)}
    assert found == {"tests.core.test_bridge", "tests.core.test_sse"}


def cited_paths(text: str) -> set[str]:
    """The test paths a text names, without the punctuation that may follow one."""
    paths: set[str] = set()
    for path, pattern in CITED.findall(text):
        path = path.rstrip(".")
        if pattern:  # only the folder of a pattern can be checked
            path = path.rsplit("/", 1)[0]
        if path.rstrip("/") != "tests" and not path.startswith(FOREIGN):
            paths.add(path)
    return paths


def exists(path: str) -> bool:
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for top in SCANNED:
        root = ROOT / top
        files += [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return [p for p in files if p.suffix in {"", ".py", ".md", ".toml", ".yaml", ".yml"}]


def test_every_test_path_cited_in_the_code_and_the_docs_exists() -> None:
    missing = {
        f"{path.relative_to(ROOT)}: {cited}"
        for path in scanned_files()
        for cited in cited_paths(path.read_text(encoding="utf-8", errors="replace"))
        if not exists(cited)
    }
    assert missing == set()


def test_the_path_check_reads_paths_as_they_are_written() -> None:
    text = (
        "checked by tests/project/test_architecture.py. See tests/core/markup/test_<name>.py,"
        " (`tests/golden/*.in.sse`), vLLM's ``tests/tool_parsers/test_x.py``, tests/old/gone.py"
    )
    assert cited_paths(text) == {
        "tests/project/test_architecture.py",
        "tests/core/markup",
        "tests/golden/*.in.sse",
        "tests/old/gone.py",
    }
    assert [exists(p) for p in sorted(cited_paths(text))] == [True, True, False, True]
