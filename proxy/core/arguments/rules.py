"""What a stream does with a call's arguments at the call's end (issue 25): the schema check
(always, detection only) and the heal and coercion an upstream turned on.

The driver (calls/driver.py ``Calls``) holds one :class:`CallRules` for every protocol and
mode; each family says where a call ends (chat: a choice's end, chat/choice.py; native
Responses: a call item's end; native Messages: a tool block's input end), and the whole
answers ask :meth:`CallRules.answer` of each call. A request without tools gets no rules at
all (:func:`call_rules` is None): its stream parses and builds nothing for them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

from proxy.core.arguments.tools import Fix, RequestTools
from proxy.core.options import UpstreamOptions

#: the empty arguments a Messages call sends as no text at all (the client rebuilds ``{}``)
EMPTY_OBJECT: Final = "{}"


@dataclass(slots=True)
class CallRules:
    """The rules of one stream's (or whole answer's) calls: its request's tools, and whether
    arguments that do not fit are healed or coerced (then each call's arguments are held and
    sent whole at its end: ``fixes``)."""

    tools: RequestTools
    heal: bool = False
    coerce: bool = False

    @property
    def fixes(self) -> bool:
        return self.heal or self.coerce

    def check(self, name: str | None, text: str, repairs: Counter[str]) -> None:
        """Count ``args-schema-mismatch:<kind>`` for arguments that do not fit their tool;
        changes nothing."""
        if name is None:
            return
        found = self.tools.check(name, text)
        if found is not None:
            repairs[found.label] += 1

    def fix(self, name: str | None, text: str, *, cut: bool) -> Fix | None:
        """Arguments made to fit (healed, coerced), or None: they stay as they came."""
        if name is None or not self.fixes:
            return None
        return self.tools.fix(name, text, cut=cut, heal=self.heal, coerce=self.coerce)

    def answer(self, name: str | None, text: str, repairs: Counter[str], *, cut: bool) -> str:
        """A whole answer's call: its arguments fixed where they may be (the repairs
        counted), then checked; the text the client gets."""
        fixed = self.fix(name, text, cut=cut)
        if fixed is not None:
            for repair in fixed.repairs:
                repairs[repair] += 1
            text = fixed.text
        self.check(name, text, repairs)
        return text


def call_rules(options: UpstreamOptions, tools: RequestTools | None) -> CallRules | None:
    """The rules for one stream, or None when the request has no tools to check against."""
    if tools is None or not tools.declared:
        return None
    return CallRules(tools, heal=options.heal_arguments, coerce=options.coerce_arguments)
