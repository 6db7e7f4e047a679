"""The part Qwen3-Coder and GLM share: parameters written as tagged text, typed by the schema.

A block of either dialect streams its call's arguments as a JSON object built a parameter at
a time (:class:`~proxy.core.markup.params.ArgsWriter`): ``{`` when the call opens, then per
parameter ``"key": value``, then ``}``. A parameter the schema types as a string (or does
not type) is forwarded while it is being written, escaped for JSON; a typed one is forwarded
once its closing tag has arrived, converted to its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import orjson

from proxy.core.markup.base import CallArgs, CallClose, CallOpen
from proxy.core.markup.block import BlockParser, Handler
from proxy.core.markup.params import (
    ArgsWriter,
    Schema,
    is_text,
    json_value,
    typed_json,
)
from proxy.core.markup.scan import MarkerScanner


class ParamsBlock(BlockParser):
    """A block whose call's parameters are tagged text; subclasses parse the tags."""

    def __init__(self, marker: str, state: str, schemas: dict[str, dict[str, Schema]]) -> None:
        super().__init__(marker, state)
        self._all_schemas = schemas
        self._schemas: dict[str, Schema] = {}
        self._writer = ArgsWriter()
        self._key = ""
        self._schema: Schema | None = None
        self._value_end: MarkerScanner | None = None
        self._after_value = ""
        self._json = False

    def open_call(self, name: str) -> None:
        self._schemas = self._all_schemas.get(name, {})
        self._writer = ArgsWriter()
        self.emit(CallOpen(name), CallArgs(self._writer.start()))

    def close_call(self) -> None:
        self.emit(CallArgs(self._writer.end()), CallClose())

    def begin_value(
        self, key: str, value_end: MarkerScanner, after: str, json: bool = False
    ) -> None:
        """The value of ``key`` starts at the cursor and ends at a marker of ``value_end``.
        ``json``: the markup says the value is JSON (DSML's ``string="false"``)."""
        self._key = key
        self._schema = self._schemas.get(key)
        self._value_end = value_end
        self._after_value = after
        self._json = json
        if not json and is_text(self._schema):
            self.emit(CallArgs(self._writer.key(key) + '"'))
            self.state = "text_value"
        else:
            self.state = "typed_value"

    def _text_value(self, final: bool) -> bool:
        assert self._value_end is not None
        text, found = self.until(self._value_end, final)
        if text:
            self.emit(CallArgs(orjson.dumps(text).decode()[1:-1]))
        if found is None:
            return bool(text)
        self.emit(CallArgs('"'))
        self.state = self._after_value
        return True

    def _typed_value(self, final: bool) -> bool:
        assert self._value_end is not None
        value = self.gather(self._value_end, final)
        if value is None:
            return False
        converted = json_value(value) if self._json else None
        if converted is None:
            converted = typed_json(value, self._schema)
        self.emit(CallArgs(self._writer.key(self._key) + converted))
        self.state = self._after_value
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "text_value": _text_value,
        "typed_value": _typed_value,
    }
