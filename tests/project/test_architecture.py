"""The core does no I/O: no module under proxy/core/ imports aiohttp, asyncio or anything else
that touches the network, the clock or randomness. The layout says which modules are core; this
test checks every one of them by path, so a new module cannot slip past a list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROXY = Path(__file__).parents[2] / "proxy"
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


# -- who may import whom -----------------------------------------------------------------------

PROTOCOLS = PROXY / "core" / "protocols"
PROTOCOL_PACKAGES = sorted(p.name for p in PROTOCOLS.iterdir() if (p / "__init__.py").is_file())


def _package_files(package: str) -> list[Path]:
    return sorted((PROTOCOLS / package).rglob("*.py"))


@pytest.mark.parametrize(
    "path",
    [path for package in PROTOCOL_PACKAGES for path in _package_files(package)],
    ids=lambda p: str(p.relative_to(PROXY)),
)
def test_a_protocol_package_imports_no_other_protocol_package(path: Path) -> None:
    """A protocol is a decoder and an encoder of its own wire format: what two protocols
    share lives beside them (protocols/base.py, native_repeats.py, the calls, the markup,
    jsonvalues.py), and only the registry and the core's facade know them all."""
    own = path.relative_to(PROTOCOLS).parts[0]
    others = {f"proxy.core.protocols.{p}" for p in PROTOCOL_PACKAGES if p != own}
    imported = _imported_modules(path)
    assert not {m for m in imported if any(m == o or m.startswith(o + ".") for o in others)}


def test_the_protocol_packages_are_the_three_registered() -> None:
    """Guards the guard: it walks every package there is, and each is registered."""
    from proxy.core.protocols.registry import CLIENT_PROTOCOLS

    assert PROTOCOL_PACKAGES == ["chat", "messages", "responses"]
    assert sorted(CLIENT_PROTOCOLS) == PROTOCOL_PACKAGES


#: the core's public faces, the only core modules the shell may import
SHELL_FACES = frozenset(
    {
        "proxy.core.streams",  # the answers: a stream's transform, whole bodies, the chat request
        "proxy.core.policy",  # the plan of a request, and whether its response is rewritten
        "proxy.core.options",  # UpstreamOptions, built once per upstream
        "proxy.core.errors",  # the error family, each with its status
        "proxy.core.routing",  # which upstream serves a model; its URL
        "proxy.core.replicas",  # which replica serves the next attempt; their health (issue 28)
        "proxy.core.affinity",  # the conversation a request belongs to, for that choice
        "proxy.core.forwarding",  # model_map and max_tokens_limit on the body sent
        "proxy.core.request_limits",  # the bounds on a request body the proxy works on
        "proxy.core.request_repairs.repair",  # the request as the chat template takes it
        "proxy.core.request_repairs.native",  # native mode's request repairs
        "proxy.core.request_repairs.needs",  # what a template needs, from its text
        "proxy.core.repairs",  # the repair kinds (metrics, logs)
        "proxy.core.ids",  # the alphabet of the ids the shell draws
        "proxy.core.sse",  # slices: a huge read's work spread over the loop's turns
    }
)
SHELL = sorted((PROXY / "shell").rglob("*.py"))


def _core_imports(path: Path) -> set[str]:
    """The core modules a file imports, ``from proxy.core import x`` read as proxy.core.x."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "proxy.core":
                modules.update(f"proxy.core.{alias.name}" for alias in node.names)
            else:
                modules.add(node.module)
    return {m for m in modules if m == "proxy.core" or m.startswith("proxy.core.")}


@pytest.mark.parametrize("path", SHELL, ids=lambda p: str(p.relative_to(PROXY)))
def test_the_shell_imports_only_the_cores_public_faces(path: Path) -> None:
    """The shell knows no protocol, no stream object and no call: it asks the facade
    (proxy/core/streams.py) and the few modules listed in SHELL_FACES."""
    assert _core_imports(path) <= SHELL_FACES


def test_the_list_of_public_faces_names_modules_that_exist_and_the_shell_uses() -> None:
    """Guards the guard: a face that is gone, or one the shell no longer needs, is dropped
    from the list; and a protocol's import is seen as the violation it is."""
    for face in SHELL_FACES:
        assert (PROXY.parent / (face.replace(".", "/") + ".py")).is_file(), face
    used = set().union(*(_core_imports(path) for path in SHELL))
    assert used == SHELL_FACES
    assert "proxy.core.protocols.chat.normalize" not in SHELL_FACES
