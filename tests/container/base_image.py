"""A local stand-in for ``python:<version>-slim``, made with debootstrap from Debian's packages.

No image registry is reachable on the CI machines, but Debian's mirror is, and Debian 12's
Python is 3.11: a minimal Debian root with python3 and pip, imported into podman as
``localhost/python:3.11-slim``, is what ``FROM python:${PYTHON_VERSION}-slim`` in
deploy/Dockerfile resolves to when built with ``--pull=never --build-arg PYTHON_VERSION=3.11``.
The Dockerfile itself stays as Docker users build it.

Two things only this lane needs go into the base, never into the Dockerfile: pip may install
system-wide (the official images allow it; Debian marks its Python externally managed), and
the host's CA bundle replaces the image's, because the package registries are reached through
a proxy whose certificate only the host trusts.

Made once and kept, keyed on everything that goes into it (the recipe below, the mirror and
the host's CA bundle): as an image in podman's storage carrying the key as a label, and as the
root file system's tarball under ``~/.cache/toolcall-proxy/`` (``$XDG_CACHE_HOME``), which
outlives a wiped podman storage. ``python -m tests.container.base_image`` makes it by hand.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.container.podman import run

SUITE = "bookworm"
PYTHON_VERSION = "3.11"  # bookworm's python3
PACKAGES = ("python3", "python3-pip", "python3-venv", "python-is-python3", "ca-certificates")
TAG = f"localhost/python:{PYTHON_VERSION}-slim"
KEY_LABEL = "org.toolcall-proxy.base-key"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# What the official slim images leave out too; about a third of a fresh minbase root.
TRIMMED = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
# Bump when the recipe changes in a way the key cannot see.
RECIPE_VERSION = 1
DEBOOTSTRAP_TIMEOUT = 1200.0


@dataclass(frozen=True, slots=True)
class BaseImage:
    tag: str
    python_version: str
    made_from: str  # "podman storage", "cached tarball" or "debootstrap"
    seconds: float


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = root / "toolcall-proxy" / "container-base"
    path.mkdir(parents=True, exist_ok=True)
    return path


def debian_mirror() -> str:
    """The machine's own Debian mirror for ``SUITE``, from apt's sources (both formats)."""
    sources = Path("/etc/apt/sources.list.d")
    for path in sorted(sources.glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields: dict[str, str] = dict(
                re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, flags=re.MULTILINE)
            )
            if (
                "deb" in fields.get("Types", "").split()
                and SUITE in fields.get("Suites", "").split()
            ):
                return fields["URIs"].split()[0]
    for path in [Path("/etc/apt/sources.list"), *sorted(sources.glob("*.list"))]:
        if path.is_file():
            for line in path.read_text().splitlines():
                parts = re.sub(r"\[[^]]*\]", "", line).split()
                if parts[:1] == ["deb"] and len(parts) > 2 and parts[2] == SUITE:
                    return parts[1]
    pytest.fail(f"no Debian mirror for {SUITE} in apt's sources on this machine", pytrace=False)


def recipe_key(mirror: str) -> str:
    digest = hashlib.sha256()
    for part in (str(RECIPE_VERSION), SUITE, mirror, *PACKAGES, *TRIMMED):
        digest.update(part.encode() + b"\0")
    digest.update(HOST_CA_BUNDLE.read_bytes())
    return digest.hexdigest()[:16]


def stored() -> tuple[str, str] | None:
    """The image id and key of the base image in podman's storage, if there is one."""
    template = f'{{{{.Id}}}} {{{{index .Labels "{KEY_LABEL}"}}}}'
    result = run(["podman", "image", "inspect", "--format", template, TAG], within=60, check=False)
    if result.returncode != 0:
        return None
    image_id, _, key = result.stdout.strip().partition(" ")
    return image_id, key


def make_rootfs_tarball(mirror: str, tarball: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("debootstrap needs root to make the base image", pytrace=False)
    with tempfile.TemporaryDirectory(dir=tarball.parent) as work:
        root = Path(work) / "root"
        run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
             SUITE, str(root), mirror],
            within=DEBOOTSTRAP_TIMEOUT,
        )  # fmt: skip
        for marker in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        shutil.copyfile(HOST_CA_BUNDLE, root / "etc/ssl/certs/ca-certificates.crt")
        for trimmed in TRIMMED:
            for entry in (root / trimmed).glob("*"):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                elif entry.name != "lock":
                    entry.unlink()
        partial = tarball.with_suffix(".partial")
        run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], within=600)
        partial.rename(tarball)  # whole or absent: a killed run leaves no half tarball


def ensure_base_image() -> BaseImage:
    started = time.monotonic()
    mirror = debian_mirror()
    key = recipe_key(mirror)
    directory = cache_dir()
    tarball = directory / f"{SUITE}-python{PYTHON_VERSION}-{key}.tar"
    with (directory / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run on this machine may be making it
        previous = stored()
        if previous is not None and previous[1] == key:
            made_from = "podman storage"
        else:
            made_from = "cached tarball" if tarball.is_file() else "debootstrap"
            if not tarball.is_file():
                # Other keys' tarballs, and what a killed run left half made.
                for stale in [*directory.glob("*.tar"), *directory.glob("*.partial")]:
                    stale.unlink()
                for stale in directory.glob("tmp*"):
                    shutil.rmtree(stale, ignore_errors=True)
                make_rootfs_tarball(mirror, tarball)
            run(
                ["podman", "import", "--change", f"LABEL {KEY_LABEL}={key}",
                 "--change", "CMD [\"python3\"]", str(tarball), TAG],
                within=600,
            )  # fmt: skip
            if previous is not None:  # untagged now; an image built on it keeps it
                run(["podman", "rmi", previous[0]], within=120, check=False)
    return BaseImage(TAG, PYTHON_VERSION, made_from, time.monotonic() - started)


if __name__ == "__main__":
    base = ensure_base_image()
    print(f"{base.tag} (from {base.made_from}, {base.seconds:.1f} s)")
