"""The test lanes: tests that need more than the package and its test extra, marked by path.

A bare ``pytest`` in a fresh virtual environment (``pip install -e '.[test]'``, no Node, no
root, no podman) runs the core and shell tests and leaves the lanes out; ``.ci/check`` runs
``pytest --lane all``, so CI runs every lane and a missing tool fails there loudly (nothing
is skipped). The lanes are pytest markers (registered in pyproject.toml), put on each test
by where its file lives (``LANES`` below), so a new test file in a lane's folder joins the
lane without an edit.

Which lanes run:

- none, by default;
- ``--lane NAME`` (repeatable) adds a lane, ``--lane all`` adds every one;
- naming a lane's folder or file on the command line runs it (``pytest tests/container``):
  asking for it is enough;
- ``-m EXPR`` takes over the choice entirely (``-m bench`` runs only the bench lane,
  ``-m "not container"`` everything else).
"""

from __future__ import annotations

from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

import pytest

#: lane (its marker's name) -> where its tests live, relative to the repository root: a
#: folder (ending in "/", everything below it) or a file glob.
LANES: dict[str, tuple[str, ...]] = {
    # the client matrix and the protocol suites' SDK drivers: Node 20+ and tests/clients/
    # node_modules (npm install there)
    "clients": ("tests/clients/", "tests/core/protocols/*/test_node_clients.py"),
    # Codex, Claude Code and OpenCode in a network namespace with only loopback: root
    # (unshare --net) and the agents from tests/clients/node_modules
    "agents": ("tests/agents/",),
    # the images built and run: podman and .ci/container-tools
    "container": ("tests/container/",),
    # the benchmark suite's own runs: real load for a minute
    "bench": ("tests/test_bench_*.py",),
    # hundreds of concurrent streams with faults, half a minute (tests/soak.py; its longer
    # runs are `python -m tests.soak`)
    "soak": ("tests/test_soak*.py",),
    # a real llama-server (.ci/llama-server builds it)
    "live": ("tests/live/",),
}
ALL = "all"
_STASH = pytest.StashKey[Counter[str]]()
ROOT = Path(__file__).resolve().parent.parent


def lane_of(path: str) -> str | None:
    """The lane of a path relative to the repository root (a folder ends in "/"), if any."""
    for lane, patterns in LANES.items():
        for pattern in patterns:
            if pattern.endswith("/") and path.startswith(pattern):
                return lane
            if not pattern.endswith("/") and fnmatch(path.removesuffix("/"), pattern):
                return lane
    return None


def _relative(path: Path) -> str | None:
    try:
        relative = path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    return relative + "/" if path.is_dir() else relative


def _asked_for(config: pytest.Config) -> set[str]:
    """The lanes whose own folder or file the command line names."""
    asked: set[str] = set()
    for arg in config.args:
        relative = _relative(Path(config.invocation_params.dir, arg.partition("::")[0]))
        lane = lane_of(relative) if relative is not None else None
        if lane is not None:
            asked.add(lane)
    return asked


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--lane",
        action="append",
        default=[],
        choices=[*LANES, ALL],
        help="also run this lane's tests (repeatable; 'all': every lane, as .ci/check does);"
        f" the lanes: {', '.join(LANES)} (tests/lanes.py)",
    )


@pytest.hookimpl(tryfirst=True)  # before -m reads the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    lanes: dict[str, str] = {}
    for item in items:
        relative = _relative(item.path)
        lane = lane_of(relative) if relative is not None else None
        if lane is not None:
            item.add_marker(getattr(pytest.mark, lane))  # strict markers: it must be registered
            lanes[item.nodeid] = lane
    if config.option.markexpr:
        return  # -m chooses
    chosen: set[str] = set(config.option.lane) | _asked_for(config)
    if ALL in chosen:
        return
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        lane = lanes.get(item.nodeid)
        (kept if lane is None or lane in chosen else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
        config.stash[_STASH] = Counter(lanes[item.nodeid] for item in left_out)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    left_out = config.stash.get(_STASH, None)
    if left_out:
        lanes = ", ".join(f"{lane} ({n})" for lane, n in sorted(left_out.items()))
        terminalreporter.write_line(
            f"lanes left out: {lanes}; `pytest --lane all` runs them (.ci/check does)"
        )
