"""The installed distribution's metadata, as `pip install .` builds it from pyproject.toml."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import proxy

ROOT = Path(__file__).resolve().parents[2]


def test_the_license_is_declared_as_an_spdx_expression() -> None:
    """The TOML-table form (``license = {text = ...}``) is deprecated and makes setuptools warn
    on every install; the SPDX string form becomes ``License-Expression`` (metadata 2.4)."""
    metadata = importlib.metadata.metadata("toolcall-proxy")
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License") is None


def test_the_version_is_written_once_and_the_build_and_the_changelog_agree() -> None:
    """proxy/__init__.py holds it; pyproject.toml reads it from there, so the installed
    metadata says the same; CHANGELOG.md has a section for it below "Unreleased"."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "proxy.__version__"}
    assert importlib.metadata.version("toolcall-proxy") == proxy.__version__, (
        "the installed metadata is older than proxy/__init__.py: pip install -e ."
    )
    releases = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert releases[:2] == ["Unreleased", proxy.__version__]
