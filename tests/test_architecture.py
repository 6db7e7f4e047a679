"""The core (codec, normalizer, dialects, routing) does no I/O: it imports no aiohttp or asyncio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROXY = Path(__file__).parent.parent / "proxy"
CORE = [
    PROXY / name
    for name in (
        "sse.py",
        "rewriter.py",
        "chunks.py",
        "chunkshape.py",
        "normalize.py",
        "choice.py",
        "pieces.py",
        "toolcall_state.py",
        "tooldelta.py",
        "completion.py",
        "options.py",
        "routing.py",
        "repairs.py",
        "errors.py",
    )
] + sorted((PROXY / "dialects").glob("*.py"))
FORBIDDEN = {
    "aiohttp",
    "asyncio",
    "socket",
    "multidict",
    "yarl",
    "logging",
    "time",
    "random",
    "uuid",
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(PROXY)))
def test_core_module_imports_no_io(path: Path) -> None:
    assert imported_roots(path).isdisjoint(FORBIDDEN)


def test_core_list_covers_the_codec_and_routing() -> None:
    names = {p.name for p in CORE}
    assert {"sse.py", "rewriter.py", "chunkshape.py", "choice.py", "routing.py", "base.py"} <= names
