"""The lanes (tests/lanes.py): every lane is a registered marker, each test gets its lane by
where its file lives, and a bare run leaves the lanes out while ``--lane``, a named path and
``-m`` take them in. Checked by collecting the real tree in a child pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.lanes import LANES, ROOT, lane_of

PYTEST = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
FOLDER = "tests/core/protocols/messages"
NODE = f"{FOLDER}/test_node_clients.py"


def test_every_lane_is_a_registered_marker_and_every_marker_a_lane() -> None:
    registered = {line.partition(":")[0] for line in PYTEST["markers"]}
    assert registered == set(LANES)
    assert all(line.partition(":")[2].strip() for line in PYTEST["markers"])


@pytest.mark.parametrize(
    ("path", "lane"),
    [
        ("tests/clients/test_matrix.py", "clients"),
        ("tests/clients/a_new_file_there.py", "clients"),
        ("tests/clients/", "clients"),
        ("tests/core/protocols/responses/test_node_clients.py", "clients"),
        ("tests/core/protocols/responses/test_native.py", None),
        ("tests/core/protocols/", None),
        ("tests/agents/test_codex.py", "agents"),
        ("tests/container/test_image.py", "container"),
        ("tests/test_bench_smoke.py", "bench"),
        ("tests/test_soak.py", "soak"),
        ("tests/live/test_llama_server.py", "live"),
        ("tests/core/test_sse.py", None),
        ("tests/", None),
    ],
)
def test_a_path_is_in_the_lane_of_its_folder_or_file(path: str, lane: str | None) -> None:
    assert lane_of(path) == lane


def test_every_test_file_of_a_lane_folder_is_in_that_lane() -> None:
    for lane, patterns in LANES.items():
        for pattern in patterns:
            if pattern.endswith("/"):
                for path in (ROOT / pattern).glob("**/test_*.py"):
                    assert lane_of(path.relative_to(ROOT).as_posix()) == lane, path


def collected(*args: str) -> set[str]:
    """The node ids a child pytest collects (and does not deselect) with these arguments."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={**os.environ, "PYTEST_ADDOPTS": ""},  # the parent's own options are not the child's
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_a_bare_run_leaves_the_lanes_out_and_each_way_of_asking_takes_them_in() -> None:
    ways = {
        "bare": (FOLDER,),
        "named": (NODE,),  # the lane's own file
        "--lane": (FOLDER, "--lane", "clients"),
        "--lane all": (FOLDER, "--lane", "all"),
        "-m": (FOLDER, "-m", "clients"),
    }
    with ThreadPoolExecutor(len(ways)) as pool:
        got = dict(zip(ways, pool.map(lambda args: collected(*args), ways.values()), strict=True))
    bare, node = got["bare"], got["named"]
    assert node, "the clients lane's file has tests"
    assert all(test.startswith(NODE) for test in node)
    assert bare, "the rest of the folder runs"
    assert not bare & node
    assert got["--lane"] == got["--lane all"] == bare | node
    assert got["-m"] == node
