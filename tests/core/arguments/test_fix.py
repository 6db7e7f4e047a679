"""Healing and coercion (issue 25 items 3 and 4): the shapes fixed, and everything else left
as it came: valid calls, cut calls, and results that would not fit."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.core.arguments.heal import HEAL_MAX_CHARS, healed_value
from proxy.core.arguments.schemas import SchemaCache
from proxy.core.arguments.tools import Fix, RequestTools
from proxy.core.repairs import Repair
from tests.core.arguments.tools import agent_tools


@pytest.fixture
def codex() -> RequestTools:
    return RequestTools.from_chat(agent_tools("codex"), SchemaCache())


@pytest.fixture
def claude() -> RequestTools:
    return RequestTools.from_chat(agent_tools("claude-code"), SchemaCache())


def healed(tools: RequestTools, name: str, text: str, **flags: bool) -> Any:
    fix = tools.fix(name, text, **{"cut": False, "heal": True, "coerce": False, **flags})
    return None if fix is None else (orjson.loads(fix.text), fix.repairs)


# The shapes of issue 25, as servers and markup dialects end a call.
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"cmd": "ls -la", "prefix_rule": ["ls",],}', {"cmd": "ls -la", "prefix_rule": ["ls"]}),
        ("{'cmd': 'ls -la', 'workdir': '/repo'}", {"cmd": "ls -la", "workdir": "/repo"}),
        ('{"cmd": "ls", "login": False, "tty": True}', {"cmd": "ls", "login": False, "tty": True}),
        ('{"cmd": "printf \'a\nb\'"}', {"cmd": "printf 'a\nb'"}),
        ('{"cmd": "echo it\'s"  ,  }', {"cmd": "echo it's"}),
    ],
    ids=["trailing-commas", "single-quotes", "python-literals", "raw-newline", "apostrophe"],
)
def test_the_shapes_of_the_issue_are_healed_into_arguments_that_fit(codex, text, value):
    assert healed(codex, "exec_command", text) == (value, (Repair.ARGS_HEALED,))


def test_python_none_heals_only_where_the_schema_takes_null(claude):
    schema = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
    tools = RequestTools.from_chat(
        [{"type": "function", "function": {"name": "f", "parameters": schema}}], SchemaCache()
    )
    assert healed(tools, "f", '{"a": None}') == ({"a": None}, (Repair.ARGS_HEALED,))
    assert healed(claude, "Bash", '{"command": None}') is None  # command must be a string


@pytest.mark.parametrize(
    "text",
    [
        '{"cmd": "rm -rf /tmp/build',  # cut inside a string
        '{"cmd": "ls", "workdir": "/repo"',  # cut after a member
        "{'cmd': 'rm -rf /tmp",  # cut, and single-quoted
        '{"cmd": "ls",',  # cut after a comma
        '{"cmd": "ls"} {"cmd": "rm"}',  # two calls run together
        'Sure: {"cmd": "ls"}',  # prose around it
        '```json\n{"cmd": "ls",}\n```',  # a code fence
        "{'cmd': 'echo it's'}",  # an apostrophe that ends the string: nobody knows where
    ],
)
def test_text_that_is_not_one_whole_object_is_never_healed(codex, text):
    assert healed_value(text) is None
    assert healed(codex, "exec_command", text) is None


def test_a_call_cut_by_a_token_limit_is_never_healed_or_coerced(codex):
    assert healed(codex, "exec_command", '{"cmd": "ls",}', cut=True) is None
    assert (
        healed(codex, "exec_command", '{"cmd": "ls", "tty": "true"}', cut=True, coerce=True) is None
    )


def test_healed_arguments_that_do_not_fit_are_left_as_they_came(codex):
    assert healed(codex, "exec_command", "{'command': 'ls',}") is None  # cmd is required
    assert healed(codex, "no_such_tool", '{"cmd": "ls",}') is None


def test_healing_is_off_unless_asked(codex):
    assert healed(codex, "exec_command", '{"cmd": "ls",}', heal=False) is None
    assert healed(codex, "exec_command", '{"cmd": "ls",}', heal=False, coerce=True) is None


def test_text_past_the_healing_limit_is_left_alone(claude):
    content = "x" * HEAL_MAX_CHARS
    text = '{"file_path": "/a", "content": "' + content + '",}'
    assert healed(claude, "Write", text) is None
    short = '{"file_path": "/a", "content": "' + content[:100] + '",}'
    assert healed(claude, "Write", short) is not None


def test_a_tool_without_a_schema_is_not_healed():
    tools = RequestTools.from_chat([{"type": "function", "function": {"name": "f"}}], SchemaCache())
    assert healed(tools, "f", '{"a": 1,}') is None


def coerce(tools: RequestTools, name: str, value: Any, **flags: bool) -> Fix | None:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return tools.fix(name, text, **{"cut": False, "heal": False, "coerce": True, **flags})


def coerced_value(tools: RequestTools, name: str, value: Any) -> Any:
    fix = coerce(tools, name, value)
    assert fix is not None
    assert fix.repairs == (Repair.ARGS_COERCED,)
    return orjson.loads(fix.text)


def test_a_string_that_is_a_number_or_a_boolean_becomes_one_where_the_schema_says_so(codex):
    assert coerced_value(codex, "exec_command", {"cmd": "ls", "max_output_tokens": "5"}) == {
        "cmd": "ls",
        "max_output_tokens": 5,
    }
    assert coerced_value(
        codex, "exec_command", {"cmd": "ls", "max_output_tokens": "2.5e3", "tty": "false"}
    ) == {"cmd": "ls", "max_output_tokens": 2500.0, "tty": False}


def test_a_single_value_becomes_an_array_where_the_schema_says_array(codex):
    assert coerced_value(codex, "exec_command", {"cmd": "git pull", "prefix_rule": "git"}) == {
        "cmd": "git pull",
        "prefix_rule": ["git"],
    }


def tools_with(parameters: dict[str, Any]) -> RequestTools:
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    return RequestTools.from_chat([tool], SchemaCache())


def test_coercion_reaches_nested_properties_and_array_items():
    tools = tools_with(
        {
            "type": "object",
            "properties": {
                "edits": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"line": {"type": "integer"}}},
                }
            },
        }
    )
    assert coerced_value(tools, "f", {"edits": [{"line": "3"}, {"line": 4}]}) == {
        "edits": [{"line": 3}, {"line": 4}]
    }
    assert coerced_value(tools, "f", {"edits": {"line": "3"}}) == {"edits": [{"line": 3}]}


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": ["integer", "string"]}, "5"),  # a string is allowed: it stays one
        ({"type": "integer"}, "5.5"),  # not an integer
        ({"type": "integer"}, " 5"),  # not exactly a number
        ({"type": "integer"}, "0x10"),
        ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, "5"),  # not guessed at
        ({"type": "number"}, "123456789012345678901234567890"),  # past 64 bits: not exact
        ({"type": "boolean"}, "True"),  # JSON's spelling only
        ({"type": "boolean"}, "yes"),
        ({"type": "array", "items": {"type": "string"}}, None),  # null is not one value
        ({"type": "array", "items": {"type": "integer"}}, "x"),  # the item would not fit
        ({"type": "integer", "minimum": 10}, "5"),  # coerced, it still does not fit
    ],
)
def test_only_what_the_schema_says_plainly_and_what_then_fits_is_coerced(schema, value):
    tools = tools_with({"type": "object", "properties": {"a": schema}})
    assert coerce(tools, "f", {"a": value}) is None


def test_arguments_that_fit_are_never_coerced(codex):
    assert coerce(codex, "exec_command", '{"cmd": "5", "max_output_tokens": 5}') is None


def test_healing_and_coercion_together(codex):
    fix = codex.fix(
        "exec_command",
        "{'cmd': 'ls', 'max_output_tokens': '5',}",
        cut=False,
        heal=True,
        coerce=True,
    )
    assert fix is not None
    assert (orjson.loads(fix.text), fix.repairs) == (
        {"cmd": "ls", "max_output_tokens": 5},
        (Repair.ARGS_HEALED, Repair.ARGS_COERCED),
    )
