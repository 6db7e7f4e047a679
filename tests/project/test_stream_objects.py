"""The shape issue 27 asks of the code a stream runs through: no stream object (what holds a
stream's state) with more than two of the project's classes in its MRO, composed of parts
instead, and no import circle among the core's modules (a part reaches what it needs of its
stream through a Protocol declared beside it, never by importing the stream's module)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from proxy.core.bridge import ChatBridge
from proxy.core.protocols.chat.choice import ChoiceNormalizer
from proxy.core.protocols.chat.normalize import StreamNormalizer
from proxy.core.protocols.messages.encode import MessagesEncoder
from proxy.core.protocols.messages.native.stream import NativeMessages
from proxy.core.protocols.responses.encode import ResponsesEncoder
from proxy.core.protocols.responses.native.stream import NativeStream

PROXY = Path(__file__).parents[2] / "proxy"
STREAM_OBJECTS = [
    NativeMessages,
    NativeStream,
    StreamNormalizer,
    ChoiceNormalizer,
    MessagesEncoder,
    ResponsesEncoder,
    ChatBridge,
]


@pytest.mark.parametrize("cls", STREAM_OBJECTS, ids=lambda c: c.__name__)
def test_a_stream_object_has_at_most_two_project_classes_in_its_mro(cls: type) -> None:
    own = [c.__qualname__ for c in cls.__mro__ if c.__module__.startswith("proxy.")]
    assert len(own) <= 2, own


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROXY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _core_imports() -> dict[str, set[str]]:
    """Each core module and the core modules it imports (a name imported from a package is
    the submodule when there is one of that name, else the package)."""
    modules = {_module_name(p): p for p in (PROXY / "core").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_the_core_has_no_import_circle() -> None:
    assert _circles(_core_imports()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    """Guards the guard."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
