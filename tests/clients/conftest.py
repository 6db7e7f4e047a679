"""Fixtures of the client matrix: the replayer, the real proxy, the matrix and its table."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.cases import load_cases
from tests.clients.matrix import Matrix, new_matrix
from tests.clients.proxy_process import ROOT, ROUTES, ProxyProcess
from tests.clients.replayer import ReplayerThread

MATRIX_KEY = pytest.StashKey[Matrix]()
# Set to rewrite the table between the markers below in docs/clients.md.
UPDATE_ENV = "TOOLCALL_UPDATE_CLIENT_MATRIX"
DOCS = (ROOT / "docs" / "clients.md",)
BLOCK = re.compile(r"(<!-- client-matrix:begin -->\n).*?(<!-- client-matrix:end -->)", re.S)


@pytest.fixture(scope="session")
def replayer() -> Iterator[ReplayerThread]:
    server = ReplayerThread(load_cases())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def proxy(
    replayer: ReplayerThread, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    process = ProxyProcess(tmp_path_factory.mktemp("proxy"), replayer.url)
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def matrix(pytestconfig: pytest.Config) -> Matrix:
    table = new_matrix(load_cases())
    pytestconfig.stash[MATRIX_KEY] = table
    return table


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    table = config.stash.get(MATRIX_KEY, None)
    if table is None or not table.runs:
        return
    text = table.render()
    terminalreporter.write_sep("=", "client compatibility matrix")
    terminalreporter.write(text)
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        path = cache.mkdir("client-matrix") / "matrix.md"
        path.write_text(text)
        terminalreporter.write_line(f"(written to {path})")
    if os.environ.get(UPDATE_ENV):
        # The docs explain only what goes wrong through the proxy; the direct failures are in
        # the table, their reasons in the run's own output.
        for doc in _update_docs(table.render(explain=tuple(ROUTES))):
            terminalreporter.write_line(f"(table updated in {doc})")


def _update_docs(text: str) -> list[Path]:
    updated = []
    for doc in DOCS:
        if not doc.is_file():
            continue
        old = doc.read_text()
        new = BLOCK.sub(lambda m: m.group(1) + text + m.group(2), old)
        if new != old:
            doc.write_text(new)
            updated.append(doc)
    return updated
