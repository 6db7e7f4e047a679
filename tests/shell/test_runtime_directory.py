"""The workers' runtime directory holds their metrics sockets, so its path must leave room
for a socket's name within ``sun_path``: a deep ``TMPDIR`` once stopped every worker at start
with ``AF_UNIX path too long``."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from proxy.shell.supervisor import SOCKET_NAME_ROOM, SOCKET_PATH_MAX, runtime_directory


def _bind_longest(directory: Path) -> None:
    path = directory / ("w" * (SOCKET_NAME_ROOM - len("/.sock")) + ".sock")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))  # raises OSError when the path does not fit


def _made_in(tmpdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    made = runtime_directory()
    assert len(os.fsencode(made)) + SOCKET_NAME_ROOM <= SOCKET_PATH_MAX
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    _bind_longest(made)
    return made


def test_a_short_tmpdir_holds_the_runtime_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="t") as short:
        assert _made_in(Path(short), monkeypatch).parent == Path(short)


def test_a_deep_tmpdir_gives_way_to_the_system_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path.joinpath(*["level-of-a-deep-tmpdir"] * 3)
    deep.mkdir(parents=True)
    made = _made_in(deep, monkeypatch)
    try:
        assert made.parent == Path("/tmp")
        assert list(deep.iterdir()) == []  # nothing left behind in the deep one
    finally:
        for child in made.iterdir():
            child.unlink()
        made.rmdir()
