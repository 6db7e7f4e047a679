"""A bound on the work of checking arguments against a schema, known before the check runs.

A validator's work is not bounded by the sizes of the schema and the instance: ``$ref`` lets a
small schema apply one subschema many times to the same value (an ``anyOf`` of two refs to the
next definition, 24 levels deep, is 2^24 applications: 0.2 s of jsonschema-rs on one call,
bench/schema_check.py), and a recursive schema does it once more per level of the instance.
The schema comes from the client and the instance from the model, and the check runs on the
event loop, so the proxy estimates the work first and skips a check whose bound is too high.

The bound: applying a schema node to an instance node applies each of its in-place
subschemas (``allOf``, ``anyOf``, ``$ref``, ...) to the same node, and each of its child
subschemas (``properties``, ``items``, ...) to nodes one level down. ``applications(d)`` is an
upper bound of the subschema applications that reach one instance node below which the
instance is at most ``d`` levels deep; times the instance's node count, it bounds the check.
A cycle back to a node already being applied at the same depth counts once (jsonschema-rs stops
there too). References the estimate cannot follow (anchors, ``$id`` below the root, other
documents) make the bound infinite: such a schema is never checked rather than checked blind.

Saying *why* arguments do not fit costs far more than saying *that* they do not: jsonschema-rs
builds an error, with the errors of every branch inside it, for each path through ``anyOf``
and the like (about 10 us a path against its 6 ns an application; 0.7 s for a 14-level
``$ref`` graph whose ``is_valid`` takes 0.2 ms). ``Expansion(..., branches_only=True)``
counts only those paths: the in-place subschemas reached, not the child subschemas a plain
object schema has many of.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

# Subschemas applied to the same instance node, and to the nodes one level down.
_SAME_LISTS: Final = ("allOf", "anyOf", "oneOf")
_SAME_ONE: Final = ("not", "if", "then", "else")
_SAME_MAPS: Final = ("dependentSchemas", "dependencies")
_DOWN_ONE: Final = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
)
_DOWN_MAPS: Final = ("properties", "patternProperties")
_DOWN_LISTS: Final = ("prefixItems", "items")  # ``items`` as a list: drafts 4 to 2019-09
_REFS: Final = ("$ref", "$dynamicRef", "$recursiveRef")
_NEW_BASE: Final = ("$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor")
_MAX_NESTING: Final = 256  # deeper than this (with references followed): not estimated


class Unbounded(Exception):
    """The estimate cannot follow the schema, or it exceeds the cap."""


class Expansion:
    """The bound of one schema (the root of its document), computed per depth on demand."""

    __slots__ = ("_busy", "_cap", "_edge", "_memo", "_node", "_root")

    def __init__(self, root: dict[str, object], cap: int, *, branches_only: bool = False) -> None:
        self._root = root
        self._cap = cap
        # applications: each node applied counts; branches: each in-place subschema reached
        self._node, self._edge = (0, 1) if branches_only else (1, 0)
        self._memo: dict[tuple[int, int], int] = {}
        self._busy: set[tuple[int, int]] = set()

    def applications(self, depth: int) -> int:
        """At most this many applications (or, ``branches_only``, in-place branches) reach one
        node of an instance ``depth`` deep; the cap plus one when more may, or when the schema
        cannot be followed."""
        try:
            return self._weight(self._root, depth, 0)
        except (Unbounded, RecursionError):
            return self._cap + 1
        finally:
            self._busy.clear()

    def _weight(self, node: object, depth: int, nesting: int) -> int:
        if not isinstance(node, dict):
            return self._node  # true, false, or something the validator rejected at compile
        key = (id(node), depth)
        known = self._memo.get(key)
        if known is not None:
            return known
        if key in self._busy:
            return self._node
        if nesting > _MAX_NESTING or (node is not self._root and _NEW_BASE_KEYS & node.keys()):
            raise Unbounded
        self._busy.add(key)
        total = self._node
        for child in _same(node):
            total += self._edge + self._weight(self._resolve(child), depth, nesting + 1)
            if total > self._cap:
                raise Unbounded
        if depth > 0:
            for child in _down(node):
                total += self._weight(child, depth - 1, nesting + 1)
                if total > self._cap:
                    raise Unbounded
        self._busy.discard(key)
        self._memo[key] = total
        return total

    def _resolve(self, child: object) -> object:
        if not isinstance(child, _Ref):
            return child
        target: object = self._root
        pointer = child.pointer
        if pointer in ("", "#"):
            return target
        if not pointer.startswith("#/"):
            raise Unbounded  # an anchor or another document
        for part in pointer[2:].split("/"):
            part = _unescape(part)
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise Unbounded
        return target


_NEW_BASE_KEYS: Final = frozenset(_NEW_BASE)


class _Ref:
    __slots__ = ("pointer",)

    def __init__(self, pointer: str) -> None:
        self.pointer = pointer


def _same(node: dict[str, object]) -> Iterator[object]:
    for key in _REFS:
        ref = node.get(key)
        if isinstance(ref, str):
            yield _Ref(ref)
        elif ref is not None:
            raise Unbounded
    for key in _SAME_LISTS:
        value = node.get(key)
        if isinstance(value, list):
            yield from value
    for key in _SAME_ONE:
        if key in node:
            yield node[key]
    for key in _SAME_MAPS:
        value = node.get(key)
        if isinstance(value, dict):
            yield from (v for v in value.values() if isinstance(v, dict | bool))


def _down(node: dict[str, object]) -> Iterator[object]:
    for key in _DOWN_ONE:
        value = node.get(key)
        if isinstance(value, dict | bool):
            yield value
    for key in _DOWN_MAPS:
        value = node.get(key)
        if isinstance(value, dict):
            yield from value.values()
    for key in _DOWN_LISTS:
        value = node.get(key)
        if isinstance(value, list):
            yield from value


def _unescape(part: str) -> str:
    if "%" in part:
        raise Unbounded  # percent-encoded: rare enough not to decode
    return part.replace("~1", "/").replace("~0", "~")


def instance_size(value: object) -> tuple[int, int]:
    """The node count of a parsed JSON value and its depth (a scalar is 1 node, depth 0)."""
    nodes = 0
    depth = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        nodes += 1
        if level > depth:
            depth = level
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return nodes, depth
