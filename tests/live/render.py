"""A chat request rendered through a chat template the way vLLM and SGLang render it: Jinja2's
sandbox as transformers sets it up (``trim_blocks``, ``lstrip_blocks``, loop controls,
``raise_exception``, ``strftime_now``, a ``tojson`` that keeps non-ASCII), with the messages as
the request sent them but for one step both servers take: an assistant's tool call
``arguments`` parsed from the JSON string into an object. Nothing else is filled in, unlike
llama.cpp's own template engine, which mends some shapes itself (tool messages as user
messages for a template without a tool role, for one)."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import TemplateError, nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateRefusal(Exception):
    """The template raised (its own ``raise_exception``, or a Jinja error on the request's
    shape)."""


def _raise(message: str) -> None:
    raise TemplateRefusal(message)


def _tojson(
    value: Any,
    indent: int | None = None,
    separators: Any = None,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _Generation(Extension):
    """transformers' ``{% generation %}...{% endgeneration %}`` (it marks the assistant's
    tokens for training masks): rendered as its body."""

    tags = {"generation"}  # noqa: RUF012 (jinja2's own class attribute)

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


@cache
def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _Generation]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime(2026, 1, 2).strftime(fmt)
    return env


@cache
def _template(path: Path) -> Any:
    return _environment().from_string(path.read_text())


def server_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as vLLM and SGLang hand them to the template: tool call arguments as
    objects (``{}`` for none)."""
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, str) and arguments:
                function["arguments"] = json.loads(arguments)
            elif not arguments:
                function["arguments"] = {}
    return out


def render(template: Path, chat: dict[str, Any]) -> str:
    """The prompt; raises TemplateRefusal when the template refuses the request."""
    kwargs = dict(chat.get("chat_template_kwargs") or {})
    try:
        return str(
            _template(template).render(
                messages=server_messages(chat["messages"]),
                tools=chat.get("tools") or None,
                add_generation_prompt=True,
                bos_token="<s>",
                eos_token="</s>",
                **kwargs,
            )
        )
    except TemplateRefusal:
        raise
    except (TemplateError, TypeError, KeyError, AttributeError, ValueError) as exc:
        raise TemplateRefusal(f"{type(exc).__name__}: {exc}") from exc
