"""Tool schemas compiled once per process, in a bounded cache keyed by the schema's bytes.

jsonschema-rs compiles them (bench/schema_check.py compares it with jsonschema and
fastjsonschema: 0.2 to 0.7 us a check on the agents' tools, 30 to 150 times faster; right on
draft 2020-12, which Claude Code's and OpenCode's tools declare; no network). It is told:

* ``offline``: a ``$ref`` to another document is never fetched (the schema then fails to
  compile and is skipped);
* ``RegexOptions``: ``pattern`` and ``patternProperties`` run on Rust's ``regex`` engine, in
  time linear in the text, with its compiled size bounded; a pattern that needs backtracking
  (look-around, back-references) fails to compile, and its schema is skipped;
* ``validate_formats=False``: ``format`` is an annotation, as draft 2020-12 has it by default;
  checking it would run more client-chosen matchers against model output for a kind of
  mismatch the proxy does not count.

A schema that fails to compile is never an error for the client: its tool's calls go
unchecked, and it is counted once per process (``uncompilable``, remembered by digest). The
cost bound of :mod:`.cost` is computed once per schema, when a check first needs it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

import jsonschema_rs
import orjson

from proxy.core.arguments.cost import Expansion, instance_size

# A compiled schema takes 18 to 29 times its JSON text (bench/schema_check.py; 27 KB for a
# 1 KB agent tool), its parsed copy and cost memo a few times more: the bound is on the text.
MAX_ENTRIES: Final = 512  #: compiled schemas kept (least recently used go first)
MAX_CACHED_BYTES: Final = 2 << 20  #: ... and their JSON text, in all (some 60 MB compiled)
MAX_SCHEMA_BYTES: Final = 256 << 10  #: a larger schema is not compiled (counted: oversized)
MAX_FAILED: Final = 1 << 16  #: digests of uncompilable schemas remembered, for counting once
#: subschema applications one check may make (about 6 ms at jsonschema-rs's 6 ns each,
#: bench/schema_check.py's $ref graph); a check bound to need more is skipped (too_costly)
MAX_APPLICATIONS: Final = 1_000_000
#: paths through anyOf, $ref and the like that naming a mismatch's kind may take (about 10 us
#: each, errors built: some 10 ms); past it the mismatch is named "other" without asking why
MAX_BRANCHES: Final = 1_000
_REGEX: Final = jsonschema_rs.RegexOptions(size_limit=1 << 20, dfa_size_limit=1 << 20)


@dataclass(slots=True)
class Compiled:
    """One tool schema, ready: its validator, its text, and (on demand) its cost bound."""

    validator: jsonschema_rs.Validator
    text: bytes
    _schema: object = None
    _expansion: Expansion | None = None
    _bounds: dict[int, int] = field(default_factory=dict)
    _branching: Expansion | None = None
    _branch_bounds: dict[int, int] = field(default_factory=dict)

    @property
    def schema(self) -> object:
        """The schema as parsed from its own text (never the request's object, which later
        code may change)."""
        if self._schema is None:
            self._schema = orjson.loads(self.text)
        return self._schema

    def affordable(self, value: object, text_length: int) -> bool:
        """Whether checking ``value`` (parsed from ``text_length`` characters) stays within
        MAX_APPLICATIONS."""
        if self._expansion is None:
            schema = self.schema
            if not isinstance(schema, dict):
                return True
            self._expansion = Expansion(schema, MAX_APPLICATIONS)
        # A node takes at least one character, so the text's length bounds the node count:
        # for most calls that answers without walking the value.
        if text_length * self._bound(_DEEP) <= MAX_APPLICATIONS:
            return True
        nodes, depth = instance_size(value)
        return nodes * self._bound(depth) <= MAX_APPLICATIONS

    def explainable(self, value: object) -> bool:
        """Whether the errors that say why ``value`` does not fit stay within MAX_BRANCHES."""
        schema = self.schema
        if not isinstance(schema, dict):
            return True
        if self._branching is None:
            self._branching = Expansion(schema, MAX_BRANCHES, branches_only=True)
        nodes, depth = instance_size(value)
        known = self._branch_bounds.get(depth)
        if known is None:
            known = self._branch_bounds[depth] = self._branching.applications(depth)
        return nodes * known <= MAX_BRANCHES

    def _bound(self, depth: int) -> int:
        known = self._bounds.get(depth)
        if known is None:
            assert self._expansion is not None
            known = self._bounds[depth] = self._expansion.applications(depth)
        return known


# The depth the shortcut assumes: any instance an acyclic schema meets is at most this deep
# as far as its bound goes (deeper levels meet no subschema); a recursive schema's bound at
# this depth is large, so the shortcut falls through to the walk.
_DEEP: Final = 64


@dataclass(slots=True)
class CacheStats:
    compiled: int = 0  #: schemas compiled (again, after an eviction)
    uncompilable: int = 0  #: distinct schemas that failed to compile, once each per process
    oversized: int = 0  #: distinct schemas over MAX_SCHEMA_BYTES (counted like uncompilable)
    too_costly: int = 0  #: checks skipped: their bound exceeded MAX_APPLICATIONS


class _Failed:
    """The cache's entry for a schema that did not compile: asked again, it is not retried."""


_FAILED: Final = _Failed()


class SchemaCache:
    """Compiled schemas by their JSON text; every request's tools share the process's one.

    Not locked: it is asked from the event loop, at each call's end (a worker process has its
    own)."""

    def __init__(
        self,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_CACHED_BYTES,
        max_schema_bytes: int = MAX_SCHEMA_BYTES,
    ) -> None:
        self._entries: OrderedDict[bytes, Compiled | _Failed] = OrderedDict()
        self._bytes = 0
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._max_schema_bytes = max_schema_bytes
        self._failed: set[bytes] = set()
        self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, schema: object) -> Compiled | None:
        """The compiled schema, or None when it cannot be had (not an object, too large, or
        rejected by the validator: each such schema counted once)."""
        if not isinstance(schema, dict):
            return None
        try:
            text = orjson.dumps(schema)
        except orjson.JSONEncodeError:  # an integer past 64 bits: orjson cannot write it
            return None
        entry = self._entries.get(text)
        if entry is not None:
            self._entries.move_to_end(text)
            return entry if isinstance(entry, Compiled) else None
        if len(text) > self._max_schema_bytes:
            if self._first_failure(text):
                self.stats.oversized += 1
            return None
        compiled = _compile(schema, text)
        if compiled is None and self._first_failure(text):
            self.stats.uncompilable += 1
        elif compiled is not None:
            self.stats.compiled += 1
        self._store(text, compiled if compiled is not None else _FAILED)
        return compiled

    def _first_failure(self, text: bytes) -> bool:
        digest = hashlib.blake2b(text, digest_size=16).digest()
        if digest in self._failed:
            return False
        if len(self._failed) < MAX_FAILED:
            self._failed.add(digest)
        return True

    def _store(self, text: bytes, entry: Compiled | _Failed) -> None:
        self._entries[text] = entry
        self._bytes += len(text)
        while self._entries and (
            len(self._entries) > self._max_entries or self._bytes > self._max_bytes
        ):
            evicted, _ = self._entries.popitem(last=False)
            self._bytes -= len(evicted)


def _compile(schema: dict[str, object], text: bytes) -> Compiled | None:
    try:
        validator = jsonschema_rs.validator_for(
            schema, offline=True, validate_formats=False, pattern_options=_REGEX
        )
    # The validator's errors are many (an invalid schema, an unresolvable reference, a regex
    # it cannot compile, a value it cannot convert); none of them is the client's problem.
    except Exception:
        return None
    return Compiled(validator, text)


#: the process's cache (the core's modules share it; tests may make their own)
SCHEMAS: Final = SchemaCache()
