"""The virtual environment llama-index runs in: made from requirements.txt beside this file,
cached under ~/.cache/toolcall-proxy/ by the file's hash, so a changed pin makes a new one.

    python -m tests.clients.llamaindex.env   # make it if it is missing; print its python

.ci/check runs that before the tests; the driver (tests/clients/drivers.py) only looks it up
and fails the lane, naming this command, when it is missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
REQUIREMENTS = HERE / "requirements.txt"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolcall-proxy"


def venv_dir() -> Path:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    return CACHE / f"llamaindex-venv-{digest}"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def ready() -> bool:
    return (venv_dir() / "complete").is_file()


def described() -> str:
    """The pins, for the matrix's list of client versions."""
    pins = [
        line.replace("==", " ")
        for line in REQUIREMENTS.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    return "; ".join(f"{pin} (llama-index venv)" for pin in pins)


def make() -> Path:
    """Make the environment unless it is there already; its python."""
    target = venv_dir()
    if ready():
        return python()
    # one left half-made (no "complete" mark) is made again from nothing
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    (target / "complete").write_text(REQUIREMENTS.read_text())
    return python()


if __name__ == "__main__":
    print(make())
