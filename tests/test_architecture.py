"""The core does no I/O: no module under proxy/core/ imports aiohttp, asyncio or anything else
that touches the network, the clock or randomness. The layout says which modules are core; this
test checks every one of them by path, so a new module cannot slip past a list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROXY = Path(__file__).parent.parent / "proxy"
CORE = sorted((PROXY / "core").rglob("*.py"))
FORBIDDEN = {
    "aiohttp",
    "asyncio",
    "socket",
    "multidict",
    "yarl",
    "logging",
    "time",
    "random",
    "secrets",
    "uuid",
    "os",
    "proxy.shell",
    "proxy.settings",
    "proxy.cli",
    "proxy.tools",
}


def imported_names(path: Path) -> set[str]:
    """Every imported module, by its root and, for the proxy's own, its first two levels."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        for module in modules:
            parts = module.split(".")
            names.add(parts[0])
            names.add(".".join(parts[:2]))
    return names


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(PROXY)))
def test_core_module_imports_no_io(path: Path) -> None:
    assert imported_names(path).isdisjoint(FORBIDDEN)


def test_core_holds_the_codec_the_calls_the_markup_and_routing() -> None:
    names = {str(p.relative_to(PROXY / "core")) for p in CORE}
    assert {
        "sse.py",
        "routing.py",
        "calls/state.py",
        "calls/record.py",
        "calls/driver.py",
        "markup/base.py",
        "protocols/chat/normalize.py",
    } <= names


CALLS = sorted((PROXY / "core" / "calls").rglob("*.py"))


@pytest.mark.parametrize("path", CALLS, ids=lambda p: str(p.relative_to(PROXY)))
def test_the_calls_know_no_protocol(path: Path) -> None:
    """The call record, the state table and the driver are shared by every protocol: the
    protocol's side implements what the driver asks for, never the other way round."""
    assert not any(name.startswith("proxy.core.protocols") for name in _imported_modules(path))


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names
