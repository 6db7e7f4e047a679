"""A request's tools, found by name when a call names one, and what is asked of its arguments.

Nothing is done per tool when the request arrives: :class:`RequestTools` keeps the request's
own ``tools`` list and reads it only when a call ends, as far as the called name, remembering
the names it passed (so a request of 1.5 million tools costs nothing until a call, and each
tool is read at most once). Responses and Messages tools are read as their translation maps
them (``convert_tools`` of each protocol, one tool at a time): a namespace's functions are
``<namespace>__<function>``, a custom tool takes ``{"input": string}``, a Messages tool's
``input_schema`` is its parameters; hosted and server tools have no calls to check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from proxy.core.arguments.check import UNKNOWN_TOOL, Mismatch, fits, mismatch
from proxy.core.arguments.coerce import coerced
from proxy.core.arguments.heal import healed_value
from proxy.core.arguments.schemas import SCHEMAS, Compiled, SchemaCache
from proxy.core.errors import ClientRequestError
from proxy.core.repairs import Repair


class _NoSchema:
    """A tool declared without parameters: any arguments are its own business."""


NO_SCHEMA: Final = _NoSchema()

# One entry of a request's ``tools`` -> the (chat name, parameters) it declares.
Reader = Callable[[object], Iterable[tuple[str, object]]]


@dataclass(frozen=True, slots=True)
class Fix:
    """Arguments changed so that they fit: the new text, and the repairs that made it."""

    text: str
    repairs: tuple[Repair, ...]


class RequestTools:
    """The tools of one request, by name; asked about a call's arguments at its end."""

    __slots__ = ("_by_name", "_cache", "_entries", "_index", "_read", "_scanned")

    def __init__(
        self, entries: Sequence[object], read: Reader, cache: SchemaCache = SCHEMAS
    ) -> None:
        self._entries = entries
        self._read = read
        self._cache = cache
        self._index: dict[str, object] = {}
        self._scanned = 0
        # a called tool's compiled schema, so that its next call costs no lookup by bytes
        self._by_name: dict[str, Compiled | None] = {}

    @classmethod
    def from_chat(cls, tools: object, cache: SchemaCache = SCHEMAS) -> RequestTools:
        """Chat Completions ``tools`` (``[{type: function, function: {name, parameters}}]``),
        also the ones a translation built."""
        return cls(_entries(tools), _chat_tool, cache)

    @classmethod
    def from_responses(cls, tools: object, cache: SchemaCache = SCHEMAS) -> RequestTools:
        """A Responses request's own ``tools``, as its translation maps them."""
        return cls(_entries(tools), _responses_tool, cache)

    @classmethod
    def from_messages(cls, tools: object, cache: SchemaCache = SCHEMAS) -> RequestTools:
        """A Messages request's own ``tools``, as its translation maps them."""
        return cls(_entries(tools), _messages_tool, cache)

    @property
    def declared(self) -> bool:
        """Whether the request declared any tool (nothing is read to say so)."""
        return bool(self._entries)

    def parameters(self, name: str) -> object | None:
        """The tool's parameter schema; NO_SCHEMA for a tool declared without one; None when
        the request has no tool of that name."""
        found = self._index.get(name)
        while found is None and self._scanned < len(self._entries):
            entry = self._entries[self._scanned]
            self._scanned += 1
            for tool_name, parameters in self._read(entry):
                self._index.setdefault(tool_name, parameters)  # the first of a name counts
            found = self._index.get(name)
        return found

    def check(self, name: str, arguments: str) -> Mismatch | None:
        """None when the arguments fit the tool's schema, or cannot be checked (they are not
        JSON, which ``args-not-json`` counts; the tool has no schema, or one that does not
        compile; the check would cost too much); else what kind of mismatch it is."""
        if self.parameters(name) is None:
            return UNKNOWN_TOOL
        compiled = self._compiled(name)
        if compiled is None:
            return None
        value = _parsed(arguments)
        if value is _NOT_JSON or not self._affordable(compiled, value, arguments):
            return None
        return mismatch(compiled, value)

    def fix(self, name: str, arguments: str, *, cut: bool, heal: bool, coerce: bool) -> Fix | None:
        """Arguments that fit, made from ones that do not, or None (the call stays as it is).

        Never for a call cut by a token limit (``cut``), never for arguments that fit or for
        a tool without a schema to fit; ``heal``: text that is not JSON, in the shapes of
        :mod:`.heal`;
        ``coerce``: the coercions of :mod:`.coerce`, also after healing.
        """
        if cut or not (heal or coerce):
            return None
        compiled = self._compiled(name)
        if compiled is None:
            return None
        value = _parsed(arguments)
        repairs: tuple[Repair, ...] = ()
        if value is _NOT_JSON:
            if not heal:
                return None
            healed = healed_value(arguments)
            if healed is None:
                return None
            value, repairs = healed, (Repair.ARGS_HEALED,)
        if not self._affordable(compiled, value, arguments):
            return None
        if not repairs and fits(compiled, value):
            return None  # it fits: precision first, not a byte changes
        if repairs and fits(compiled, value):
            return _fix(value, repairs)
        if not coerce:
            return None
        value, changed = coerced(value, compiled.schema)
        if not changed or not self._affordable(compiled, value, arguments):
            return None
        if fits(compiled, value):
            return _fix(value, (*repairs, Repair.ARGS_COERCED))
        return None

    def _compiled(self, name: str) -> Compiled | None:
        if name in self._by_name:
            return self._by_name[name]
        parameters = self.parameters(name)
        found = None
        if parameters is not None and parameters is not NO_SCHEMA:
            found = self._cache.get(parameters)
        self._by_name[name] = found
        return found

    def _affordable(self, compiled: Compiled, value: object, text: str) -> bool:
        if compiled.affordable(value, len(text)):
            return True
        self._cache.stats.too_costly += 1
        return False


class _NotJSON:
    pass


_NOT_JSON: Final = _NotJSON()


def _parsed(text: str) -> object:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _fix(value: object, repairs: tuple[Repair, ...]) -> Fix | None:
    try:
        return Fix(orjson.dumps(value).decode(), repairs)
    except orjson.JSONEncodeError:  # a value orjson cannot write (an integer past 64 bits)
        return None


def _entries(tools: object) -> Sequence[object]:
    # a parsed request's list; any other sequence of entries reads the same way
    if isinstance(tools, Sequence) and not isinstance(tools, str | bytes):
        return tools
    return ()


def _chat_tool(entry: object) -> Iterable[tuple[str, object]]:
    if not isinstance(entry, dict):
        return ()
    function = entry.get("function")
    if not isinstance(function, dict):
        return ()
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return ()
    parameters = function.get("parameters")
    return ((name, NO_SCHEMA if parameters is None else parameters),)


def _responses_tool(entry: object) -> Iterable[tuple[str, object]]:
    # Imported here: the protocol packages will import this module when they check calls.
    from proxy.core.protocols.responses.tools import convert_tools

    try:
        converted = convert_tools([entry]).tools
    except ClientRequestError:  # a tool the translation would refuse: no calls to check
        return ()
    return [pair for tool in converted for pair in _chat_tool(tool)]


def _messages_tool(entry: object) -> Iterable[tuple[str, object]]:
    from proxy.core.protocols.messages.request import convert_tools

    try:
        converted = convert_tools([entry])
    except ClientRequestError:
        return ()
    return [pair for tool in converted for pair in _chat_tool(tool)]
