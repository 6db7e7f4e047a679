"""The installed distribution's metadata, as `pip install .` builds it from pyproject.toml."""

from __future__ import annotations

import importlib.metadata


def test_the_license_is_declared_as_an_spdx_expression() -> None:
    """The TOML-table form (``license = {text = ...}``) is deprecated and makes setuptools warn
    on every install; the SPDX string form becomes ``License-Expression`` (metadata 2.4)."""
    metadata = importlib.metadata.metadata("toolcall-proxy")
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License") is None
