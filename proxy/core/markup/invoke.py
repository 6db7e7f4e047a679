"""The part MiniMax-M2, DeepSeek V3.2 (DSML) and Step-3 share: calls written as XML elements
with the names in attributes, ``<invoke name="f"><parameter name="k">v</parameter></invoke>``.

The three spell the tags with their own prefix (``<invoke``, ``<｜DSML｜invoke``,
``<steptml:invoke``) and wrap the calls in their own block markers; the elements inside are
the same. A call opens once its ``invoke`` tag is complete (its name is known), and its
arguments stream a parameter at a time (:class:`~proxy.core.markup.xmlcall.ParamsBlock`):
string values while they are written, typed ones once their closing tag arrived.

An attribute value is quoted with ``"`` or ``'``, or bare (MiniMax's own parser takes all
three, ``extract_name`` of its tool-calling guide). A tag that does not end within
:data:`MAX_TAG` characters, or that holds anything but the expected attributes, is not the
dialect's: the block breaks and fails open.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from proxy.core.markup.block import DONE, Broken, Handler, name_char
from proxy.core.markup.params import Schema
from proxy.core.markup.scan import MarkerScanner
from proxy.core.markup.xmlcall import ParamsBlock

MAX_TAG: Final = 256
_VALUE: Final = r"""(?:"([^"<>]*)"|'([^'<>]*)'|([^\s"'<>=]+))"""
_NAME_ATTR: Final = re.compile(rf"\s+name\s*=\s*{_VALUE}")
_STRING_ATTR: Final = re.compile(r"""\s+string\s*=\s*(?:"(true|false)"|'(true|false)')\s*""")


@dataclass(frozen=True, slots=True)
class Tags:
    """How one dialect spells the elements (``prefix`` is what comes between ``<`` or ``</``
    and the element's name) and the marker that ends its block."""

    prefix: str
    block_end: str
    trim_newlines: bool  # drop one newline after the opening tag and one before the closing
    string_attr: bool = False  # DSML: ``string="true|false"`` on each parameter

    @property
    def invoke(self) -> str:
        return f"<{self.prefix}invoke"

    @property
    def invoke_end(self) -> str:
        return f"</{self.prefix}invoke>"

    @property
    def parameter(self) -> str:
        return f"<{self.prefix}parameter"

    def value_end(self) -> MarkerScanner:
        end = f"</{self.prefix}parameter>"
        return MarkerScanner((f"\n{end}", end) if self.trim_newlines else (end,))


@dataclass(frozen=True, slots=True)
class Attributes:
    name: str
    string: bool | None  # DSML's ``string`` attribute; None when absent


def attributes(tag: str, with_string: bool) -> Attributes:
    """The attributes of an opening tag, the text between its element name and ``>``."""
    match = _NAME_ATTR.match(tag)
    if match is None:
        raise Broken(f"expected a name attribute, got {tag[:20]!r}")
    name = next(group for group in match.groups() if group is not None)
    rest = tag[match.end() :]
    string: bool | None = None
    if with_string and rest.strip():
        flag = _STRING_ATTR.fullmatch(rest)
        if flag is None:
            raise Broken(f"unexpected attributes {rest[:20]!r}")
        string = "true" in flag.groups()
    elif rest.strip():
        raise Broken(f"unexpected attributes {rest[:20]!r}")
    if not name or not all(map(name_char, name)):
        raise Broken(f"{name!r} is not a name")
    return Attributes(name, string)


class InvokeBlock(ParamsBlock):
    """The calls of one block: ``invoke`` elements until the block's end marker.

    Subclasses may start elsewhere (``state``) and go elsewhere after each call
    (``after_call``) when the dialect puts markers of its own around every call."""

    def __init__(
        self,
        marker: str,
        tags: Tags,
        schemas: dict[str, dict[str, Schema]],
        state: str = "calls",
        after_call: str = "calls",
    ) -> None:
        super().__init__(marker, state, schemas)
        self.tags = tags
        self._after_call = after_call
        self._value_end_tag = tags.value_end()
        self._string: bool | None = None

    def tag_attributes(self, final: bool, with_string: bool = False) -> Attributes | None:
        """The attributes of the tag at the cursor, up to and past its ``>``."""
        # the same verdict however the tag was cut: a "<" before the end, then the length
        window = self.buf[self.pos : self.pos + MAX_TAG]
        end, inner = window.find(">"), window.find("<")
        if inner >= 0 and (end < 0 or inner < end):
            raise Broken("a tag inside a tag")
        if end < 0:
            if final or len(window) >= MAX_TAG:
                raise Broken("a tag that does not end")
            return None
        found = attributes(window[:end], with_string)
        self.pos += end + 1
        return found

    def _calls(self, final: bool) -> bool:
        self.skip_ws()
        tag = self.literal((self.tags.invoke, self.tags.block_end), final)
        if tag is None:
            return False
        self.state = "invoke" if tag == self.tags.invoke else DONE
        return True

    def _invoke(self, final: bool) -> bool:
        found = self.tag_attributes(final)
        if found is None:
            return False
        self.open_call(found.name)
        self.state = "params"
        return True

    def _params(self, final: bool) -> bool:
        self.skip_ws()
        tag = self.literal((self.tags.parameter, self.tags.invoke_end), final)
        if tag is None:
            return False
        if tag == self.tags.invoke_end:
            self.close_call()
            self.state = self._after_call
        else:
            self.state = "parameter"
        return True

    def _parameter(self, final: bool) -> bool:
        found = self.tag_attributes(final, self.tags.string_attr)
        if found is None:
            return False
        self._key = found.name
        self._string = found.string
        self.state = "value_start"
        return True

    def _value_start(self, final: bool) -> bool:
        if self.tags.trim_newlines:
            if self.at_end():
                if final:
                    raise Broken("markup ended before a parameter value")
                return False
            if self.peek() == "\n":
                self.pos += 1
        self.begin_value(self._key, self._value_end_tag, after="params", json=self._string is False)
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "calls": _calls,
        "invoke": _invoke,
        "params": _params,
        "parameter": _parameter,
        "value_start": _value_start,
        **ParamsBlock.STEPS,
    }
