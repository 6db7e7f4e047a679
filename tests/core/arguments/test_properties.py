"""Properties of issue 25: valid arguments in, identical out; truncated arguments in, never
healed; detection never changes anything. Over the real agents' tools."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema_rs
import orjson
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from proxy.core.arguments.check import Mismatch
from proxy.core.arguments.schemas import SchemaCache
from proxy.core.arguments.tools import RequestTools
from tests.core.arguments.tools import arguments_texts, every_tool, fitting

TOOLS = every_tool()
IDS = [f"{agent}/{tool['function']['name']}" for agent, _, tool in TOOLS]
FLAGS = {"heal": True, "coerce": True}
PROPERTY = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)


@pytest.mark.parametrize(("agent", "tools", "tool"), TOOLS, ids=IDS)
@PROPERTY
@given(data=st.data())
def test_arguments_that_fit_come_out_identical(agent, tools, tool, data):
    function = tool["function"]
    value = data.draw(fitting(function["parameters"]))
    assume(jsonschema_rs.validator_for(function["parameters"]).is_valid(value))
    text = data.draw(arguments_texts(value))
    request = RequestTools.from_chat(tools, SchemaCache())
    assert request.check(function["name"], text) is None
    assert request.fix(function["name"], text, cut=False, **FLAGS) is None
    assert request.fix(function["name"], text, cut=True, **FLAGS) is None


@pytest.mark.parametrize(("agent", "tools", "tool"), TOOLS, ids=IDS)
@PROPERTY
@given(data=st.data())
def test_truncated_arguments_are_never_healed(agent, tools, tool, data):
    function = tool["function"]
    value = data.draw(fitting(function["parameters"]))
    text = data.draw(arguments_texts(value))
    # ... also written the broken ways a heal would otherwise fix
    text = data.draw(st.sampled_from([text, text.replace('"', "'"), text[:-1] + ",}"]))
    cut_at = data.draw(st.integers(1, len(text) - 1))
    prefix = text[:cut_at]
    assume(prefix.strip() != text.strip())
    request = RequestTools.from_chat(tools, SchemaCache())
    for cut in (False, True):
        fix = request.fix(function["name"], prefix, cut=cut, **FLAGS)
        assert fix is None, (prefix, fix)


@example(name="exec_command", text='{"cmd": "ls", "max_output_tokens": "5"}')
@example(name="exec_command", text="{'cmd': 'ls',}")
@example(name="Bash", text="{}")
@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from([tool["function"]["name"] for _, _, tool in TOOLS] + ["nope"]),
    text=st.text(max_size=60)
    | st.builds(
        lambda v: orjson.dumps(v).decode(),
        st.dictionaries(
            st.text(max_size=8),
            st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8) | st.booleans(),
            max_size=4,
        ),
    ),
)
def test_detection_changes_nothing(name, text):
    every = [tool for _, _, tool in TOOLS]
    before = copy.deepcopy(every)
    request = RequestTools.from_chat(every, SchemaCache())
    found = request.check(name, text)
    assert found is None or isinstance(found, Mismatch)
    assert every == before  # the request's tools, schemas and all, as they came
    assert request.check(name, text) == found  # asked again, the same answer


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
SCHEMA_WORDS = st.sampled_from(
    [
        "type",
        "properties",
        "items",
        "$ref",
        "anyOf",
        "required",
        "enum",
        "pattern",
        "$defs",
        "not",
        "additionalProperties",
        "minimum",
        "$schema",
    ]
)
SCHEMAS = st.recursive(
    st.booleans() | st.dictionaries(SCHEMA_WORDS, JSON_VALUES, max_size=3),
    lambda inner: st.dictionaries(
        SCHEMA_WORDS | st.text(max_size=4), inner | JSON_VALUES, max_size=4
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    protocol=st.sampled_from(["chat", "responses", "messages"]),
    schema=SCHEMAS,
    entry=JSON_VALUES,
    text=st.text(max_size=40) | JSON_VALUES.map(lambda v: orjson.dumps(v).decode()),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_any_tools_and_any_arguments_never_raise(protocol, schema, entry, text, flags):
    """Whatever the client declared and the model wrote: an answer, never an exception."""
    tools = [
        {"type": "function", "function": {"name": "f", "parameters": schema}},
        {"type": "function", "name": "f", "parameters": schema},
        {"name": "f", "input_schema": schema},
        entry,
    ]
    make = {
        "chat": RequestTools.from_chat,
        "responses": RequestTools.from_responses,
        "messages": RequestTools.from_messages,
    }[protocol]
    request = make(tools, SchemaCache())
    cut, heal, coerce = flags
    for name in ("f", "g"):
        found = request.check(name, text)
        assert found is None or isinstance(found, Mismatch)
        fix = request.fix(name, text, cut=cut, heal=heal, coerce=coerce)
        if fix is not None:
            assert not cut
            assert request.check(name, fix.text) is None  # what it gives fits


def written(value: Any, quote: str = '"', python: bool = False) -> str:
    """``value`` as a model may write it: strings in ``quote`` (in single quotes, a double
    quote inside left bare and a single one escaped), Python's literals for JSON's."""
    if isinstance(value, str):
        body = orjson.dumps(value).decode()[1:-1]
        if quote == "'":
            body = body.replace('\\"', '"').replace("'", "\\'")
        return f"{quote}{body}{quote}"
    if isinstance(value, dict):
        members = (
            f"{written(k, quote, python)}: {written(v, quote, python)}" for k, v in value.items()
        )
        return "{" + ", ".join(members) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(written(v, quote, python) for v in value) + "]"
    if python and (value is None or isinstance(value, bool)):
        return repr(value)
    return orjson.dumps(value).decode()


def broken_forms(value: Any) -> list[str]:
    """The value's text as a server breaks it, each way that keeps its meaning: a trailing
    comma, single quotes, Python's literals, raw newlines for the escaped ones."""
    text = orjson.dumps(value).decode()
    forms = [text[:-1] + ",}", written(value, "'"), written(value, python=True)]
    if "\\n" in text and "\\\\" not in text:
        forms.append(text.replace("\\n", "\n"))
    return [form for form in forms if not parses(form)]  # a form that is JSON is no broken one


def parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


WITH_PROPERTIES = [
    (a, t, tool) for a, t, tool in TOOLS if tool["function"]["parameters"].get("properties")
]


@pytest.mark.parametrize(
    ("agent", "tools", "tool"),
    WITH_PROPERTIES,
    ids=[f"{a}/{tool['function']['name']}" for a, _, tool in WITH_PROPERTIES],
)
@PROPERTY
@given(data=st.data())
def test_a_healed_call_is_the_call_that_was_meant(agent, tools, tool, data):
    function = tool["function"]
    value = data.draw(fitting(function["parameters"]))
    assume(isinstance(value, dict) and value)
    assume(jsonschema_rs.validator_for(function["parameters"]).is_valid(value))
    request = RequestTools.from_chat(tools, SchemaCache())
    for broken in broken_forms(value):
        fix = request.fix(function["name"], broken, cut=False, heal=True, coerce=False)
        assert fix is not None, broken
        assert orjson.loads(fix.text) == value, broken  # exactly the value meant
