"""Harmony: gpt-oss's channel messages addressed ``to=functions.NAME``.

The harmony format (openai-cookbook ``articles/openai-harmony.md``, "Receiving tool calls";
the gpt-oss ``chat_template.jinja``) puts the recipient in the message header, on the
``commentary`` channel, optionally constrained to JSON, the arguments as the message (one
line, cut here)::

    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"location":"San Francisco"}<|call|>

The recipient may also sit in the role part:
``<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{...}``.
Servers that decode without special tokens leak the same with the tokens removed
(Rapid-MLX#444: ``comment`` / ``ary`` / `` to`` / ``=`` / ``functions`` / ``.calculate`` ...)::

    commentary to=functions.calculate json{"expression": "2+2"}

Those word openers are ordinary text too, so they are looked for where the content starts,
and anywhere else only when the content started the way such a stream does: with the channel
the server's prompt left open (``analysis``, ``commentary``, ``final``: the prompt ends with
``<|start|>assistant``) or with the role (``assistantfinal...`` when the analysis went to the
reasoning). Any other content is never held back for them.

The call opens when its arguments start, so prose that merely says ``to=functions.x`` stays
content. Built-in tools (``to=browser.search``, ``to=python``) are not function calls and
are left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.base import CallOpen
from proxy.core.markup.block import (
    DONE,
    WHITESPACE,
    Block,
    Broken,
    Dialect,
    Handler,
    name_char,
)
from proxy.core.markup.jsonscan import JsonArgs, JsonBlock, json_part

RECIPIENT = "to=functions."
OPENERS = (
    "<|start|>assistant<|channel|>commentary " + RECIPIENT,
    "<|channel|>commentary " + RECIPIENT,
    "<|start|>assistant " + RECIPIENT,
)
WORD_OPENERS = (
    "assistantcommentary " + RECIPIENT,  # "<|start|>assistant<|channel|>" without its tokens
    "commentary " + RECIPIENT,
)
WORD_STARTS = ("analysis", "commentary", "final", "assistant")
# What may stand between the name and the arguments, in any order.
HEADER_PARTS = ("<|constrain|>", "<|channel|>", "<|message|>", "commentary", "json")
CALL = "<|call|>"


def _name_char(char: str) -> bool:
    return name_char(char) and char != ":"


class HarmonyBlock(JsonBlock):
    def __init__(self, marker: str) -> None:
        super().__init__(marker, "name")
        self._function = ""

    def _name(self, final: bool) -> bool:
        name = self.name(_name_char, WHITESPACE + "<{", final)
        if name is None:
            return False
        self._function = name
        self.state = "header"
        return True

    def _header(self, final: bool) -> bool:
        self.skip_ws()
        if self.peek() == "{":
            self.emit(CallOpen(self._function))
            self.part = JsonArgs(self)
            self.state = "args"
            return True
        if self.at_end() and final:
            raise Broken("markup ended in a message header")
        return self.literal(HEADER_PARTS, final) is not None

    def _end(self, final: bool) -> bool:
        if self.optional((CALL,), final) is None:
            return False
        self.state = DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "name": _name,
        "header": _header,
        "args": json_part("end"),
        "end": _end,
    }


class Harmony(Dialect):
    name = "harmony"
    openers = OPENERS
    word_openers = WORD_OPENERS
    word_starts = WORD_STARTS

    def block(self, marker: str) -> Block:
        return HarmonyBlock(marker)
