"""The live lane's shared parts: the llama-server build and the tiny model, made once per
session. The ``live`` lane (tests/lanes.py marks every test here by its path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.server import Build, build
from tests.live.tiny_model import write_model


@pytest.fixture(scope="session")
def llama_build() -> Build:
    return build()


@pytest.fixture(scope="session")
def tiny_model(llama_build: Build, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(llama_build.vocab, tmp_path_factory.mktemp("model") / "tiny.gguf")
