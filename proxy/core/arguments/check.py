"""Whether a call's arguments fit its tool's schema, and what kind of mismatch it is if not.

The kinds are what the operations metrics count (``args-schema-mismatch:<kind>``, as the
dialect kinds are labelled): the call names no tool of the request, a required property is
missing, a property the schema does not allow is there, a value has the wrong type, a value is
not one the schema lists, or something else (a bound, a pattern, a combination). One call has
one kind: when its arguments miss in several ways, the first of that order names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from proxy.core.arguments.schemas import Compiled
from proxy.core.repairs import Repair


class MismatchKind(StrEnum):
    UNKNOWN_TOOL = "unknown-tool"
    REQUIRED = "required"
    UNKNOWN_PROPERTY = "unknown-property"
    TYPE = "type"
    ENUM = "enum"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Mismatch:
    kind: MismatchKind

    @property
    def label(self) -> str:
        """The repair kind with its label, as metrics and the access line count it."""
        return f"{Repair.ARGS_SCHEMA_MISMATCH}:{self.kind}"


_BY_KEYWORD: Final = {
    "required": MismatchKind.REQUIRED,
    "additionalProperties": MismatchKind.UNKNOWN_PROPERTY,
    "unevaluatedProperties": MismatchKind.UNKNOWN_PROPERTY,
    "type": MismatchKind.TYPE,
    "enum": MismatchKind.ENUM,
    "const": MismatchKind.ENUM,
}
_ORDER: Final = tuple(MismatchKind)
# Errors that say the validator could not decide, not that the arguments are wrong.
_UNDECIDED: Final = frozenset({"backtrackLimitExceeded", "regexEngineFailure", "referencing"})
_MAX_ERRORS: Final = 32  # read this many to name the kind; the rest are not looked at

UNKNOWN_TOOL: Final = Mismatch(MismatchKind.UNKNOWN_TOOL)
_MISMATCHES: Final = {kind: Mismatch(kind) for kind in MismatchKind}


def fits(compiled: Compiled, value: object) -> bool:
    """The validator's answer alone (the caller has bounded its cost)."""
    return compiled.validator.is_valid(value)


def mismatch(compiled: Compiled, value: object) -> Mismatch | None:
    """None when ``value`` fits (or the validator cannot decide), else its kind; "other" when
    asking why would cost too much (schemas.MAX_BRANCHES)."""
    if compiled.validator.is_valid(value):
        return None
    if not compiled.explainable(value):
        return _MISMATCHES[MismatchKind.OTHER]
    best: MismatchKind | None = None
    for count, error in enumerate(compiled.validator.iter_errors(value)):
        name = error.kind.name
        if name in _UNDECIDED:
            return None
        kind = _BY_KEYWORD.get(name, MismatchKind.OTHER)
        if best is None or _ORDER.index(kind) < _ORDER.index(best):
            best = kind
        if best is MismatchKind.REQUIRED or count + 1 >= _MAX_ERRORS:
            break
    return _MISMATCHES[best if best is not None else MismatchKind.OTHER]
