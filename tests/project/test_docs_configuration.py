"""docs/configuration.md's table names exactly the settings of proxy/settings.py.

An operator looks a key up there; a setting added without a row (or a row left behind after a
setting is gone) is a bug in the docs. The keys are the schema's leaves, as the file spells
them: ``timeouts.idle``, ``upstreams[].name``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import get_args, get_origin

from pydantic import BaseModel

from proxy.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
TABLE_HEADER = "| key | default | meaning |"


def setting_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every leaf of the schema: nested models joined with ".", lists of models with "[]."."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if get_origin(annotation) is list and _is_model(get_args(annotation)[0]):
            yield from setting_keys(get_args(annotation)[0], f"{prefix}{name}[].")
        elif _is_model(annotation):
            assert isinstance(annotation, type)
            yield from setting_keys(annotation, f"{prefix}{name}.")
        else:
            yield prefix + name


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def documented_keys(doc: str) -> set[str]:
    """The keys named in the first column of the table (several to a row, each in backticks)."""
    lines = doc.splitlines()
    start = lines.index(TABLE_HEADER)
    keys: set[str] = set()
    for line in lines[start + 2 :]:  # past the header and its --- row
        if not line.startswith("|"):
            break
        keys.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return keys


def test_the_table_names_every_setting_and_no_other() -> None:
    documented = documented_keys(DOC.read_text(encoding="utf-8"))
    settings = set(setting_keys(Settings))
    assert (sorted(settings - documented), sorted(documented - settings)) == ([], []), (
        "(in proxy/settings.py without a row in docs/configuration.md,"
        " rows in docs/configuration.md naming no setting)"
    )


def test_the_key_reader_sees_nested_and_listed_settings() -> None:
    """Guards the guard: the schema's leaves are read as the docs spell them, and dropping a
    row from the real table leaves its key undocumented."""
    keys = set(setting_keys(Settings))
    assert {"host", "timeouts.idle", "limits.max_held_bytes", "upstreams[].url"} <= keys
    assert "timeouts" not in keys
    assert "upstreams" not in keys
    doc = DOC.read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `timeouts.idle` |"))
    assert "timeouts.idle" in documented_keys(doc)
    assert "timeouts.idle" not in documented_keys(doc.replace(row + "\n", ""))
