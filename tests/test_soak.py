"""The soak run's short form passes its checks: no byte lost, every departed client's upstream
request cancelled, tasks, file descriptors and memory back at rest (tests/soak.py says how).

It runs as its own process, as ``python -m tests.soak --short`` does, so its event loop and
its logging are its own; the soak lane (tests/lanes.py) keeps it out of a bare ``pytest``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_short_soak_run_passes_every_check() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.soak", "--short"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    print(done.stdout)  # the figures, shown with -rP
    assert done.returncode == 0, f"the soak run failed:\n{done.stdout}\n{done.stderr}"
    assert "bytes lost: 0" in done.stdout, done.stdout
