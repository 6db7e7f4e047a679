"""The request repairer (proxy/core/request_repairs/), rule by rule: what each changes, that a
request none applies to comes back as the very object, and the Mistral id map's promises."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from proxy.core.protocols.messages.native_request import native_request as messages_native
from proxy.core.protocols.responses.native_tools import native_request as responses_native
from proxy.core.repairs import Repair
from proxy.core.request_repairs import ids
from proxy.core.request_repairs.needs import FAMILIES, TemplateNeeds, needs_of_template
from proxy.core.request_repairs.repair import repair_request

MISTRAL = FAMILIES["mistral"]


def call(call_id: str, name: str = "f", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_request_no_rule_applies_to_comes_back_as_the_very_object():
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [call("a0b1c2d3e")]},
            {"role": "tool", "tool_call_id": "a0b1c2d3e", "content": "r"},
        ],
        "x_unknown": {"kept": True},
    }
    before = copy.deepcopy(body)
    for needs in FAMILIES.values():
        if needs.no_system_role:
            continue  # Gemma 2's own rule moves the system message (below)
        repaired = repair_request(body, needs)
        assert repaired.body is body
        assert not repaired.repairs
    assert body == before


def test_codex_developer_messages_become_one_leading_system_message():
    body = {
        "messages": [
            {"role": "system", "content": "instructions"},
            {"role": "developer", "content": "one"},
            {"role": "user", "content": "context"},
            {"role": "developer", "content": ""},
            {"role": "user", "content": "task"},
        ]
    }
    repaired = repair_request(body)
    assert repaired.body["messages"] == [
        {"role": "system", "content": "instructions\n\none"},
        {"role": "user", "content": "context\n\ntask"},
    ]
    assert set(repaired.repairs) == {
        Repair.DEVELOPER_ROLE,
        Repair.SYSTEM_NOT_FIRST,
        Repair.SAME_ROLE_CONSECUTIVE,
    }
    assert body["messages"][1]["role"] == "developer", "the client's request is not changed"


def test_a_lone_leading_developer_message_only_changes_its_role():
    repaired = repair_request(
        {"messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}]}
    )
    assert repaired.body["messages"][0] == {"role": "system", "content": "d"}
    assert set(repaired.repairs) == {Repair.DEVELOPER_ROLE}


def test_system_with_an_image_part_keeps_its_parts_when_merged():
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    repaired = repair_request(
        {
            "messages": [
                {"role": "system", "content": "a"},
                {"role": "user", "content": "u"},
                {"role": "system", "content": [image]},
            ]
        }
    )
    assert repaired.body["messages"][0] == {
        "role": "system",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "\n\n"}, image],
    }


def test_same_role_merge_joins_strings_and_concatenates_part_lists_but_never_tool_messages():
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    body = {
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": "b"}, image]},
            {"role": "assistant", "content": "thinking aloud"},
            {"role": "assistant", "content": None, "tool_calls": [call("a0b1c2d3e")]},
            {"role": "tool", "tool_call_id": "a0b1c2d3e", "content": "r1"},
            {"role": "tool", "tool_call_id": "a0b1c2d3e", "content": "r2"},
        ]
    }
    messages = repair_request(body).body["messages"]
    assert messages[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, image],
    }
    assert messages[1] == {
        "role": "assistant",
        "content": "thinking aloud",
        "tool_calls": [call("a0b1c2d3e")],
    }
    assert [m["role"] for m in messages[2:]] == ["tool", "tool"]


def test_an_assistant_turn_with_calls_is_not_merged_with_the_next_assistant_message():
    body = {
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [call("a0b1c2d3e")]},
            {"role": "assistant", "content": "later"},
        ]
    }
    assert repair_request(body).body is body


def test_null_content_beside_tool_calls_becomes_an_empty_string():
    body = {
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "tool_calls": [call("a0b1c2d3e")]},
        ]
    }
    repaired = repair_request(body)
    assert repaired.body["messages"][1]["content"] == ""
    assert set(repaired.repairs) == {Repair.CALL_CONTENT_NULL}


def test_text_only_part_lists_become_strings_and_image_lists_stay():
    image = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    body = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": image},
        ]
    }
    messages = repair_request(body).body["messages"]
    assert messages[0]["content"] == "a\n\nb"
    assert messages[2]["content"] is image


def test_a_conversation_opening_with_the_assistant_gets_an_empty_user_turn_first():
    body = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "Hi!"},
            {"role": "user", "content": "u"},
        ]
    }
    repaired = repair_request(body)
    assert [m["role"] for m in repaired.body["messages"]] == ["system", "user", "assistant", "user"]
    assert repaired.body["messages"][1] == {"role": "user", "content": ""}
    assert set(repaired.repairs) == {Repair.FIRST_TURN_NOT_USER}


def test_gemma2_gets_the_system_text_in_its_first_user_message():
    body = {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    }
    repaired = repair_request(body, FAMILIES["gemma2"])
    assert repaired.body["messages"] == [{"role": "user", "content": "be brief\n\nhi"}]
    assert Repair.SYSTEM_ROLE_UNSUPPORTED in repaired.repairs
    assert repair_request(body).body is body, "only where the template needs it"


def test_llama3_gets_parallel_calls_one_per_assistant_message_each_with_its_result():
    body = {
        "messages": [
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": "both",
                "tool_calls": [call("a", "f"), call("b", "g")],
            },
            {"role": "tool", "tool_call_id": "b", "content": "rb"},
            {"role": "tool", "tool_call_id": "a", "content": "ra"},
        ]
    }
    repaired = repair_request(body, FAMILIES["llama3"])
    assert repaired.body["messages"][1:] == [
        {"role": "assistant", "content": "both", "tool_calls": [call("a", "f")]},
        {"role": "tool", "tool_call_id": "a", "content": "ra"},
        {"role": "assistant", "content": "", "tool_calls": [call("b", "g")]},
        {"role": "tool", "tool_call_id": "b", "content": "rb"},
    ]
    assert Repair.PARALLEL_CALLS_UNSUPPORTED in repaired.repairs


def test_mistral_user_text_after_tool_results_joins_the_last_result():
    body = {
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [call("a0b1c2d3e")]},
            {"role": "tool", "tool_call_id": "a0b1c2d3e", "content": "18 C"},
            {"role": "user", "content": "thanks"},
        ]
    }
    repaired = repair_request(body, MISTRAL)
    assert repaired.body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "a0b1c2d3e", "content": "18 C\n\nthanks"}
    ]
    image = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    body["messages"][3] = {"role": "user", "content": image}
    assert [m["role"] for m in repair_request(body, MISTRAL).body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


def test_mistral_ids_map_alike_in_calls_and_results_and_valid_ids_stay():
    body = {
        "messages": [
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("call_agent1"), call("Ab3dE6gH9")],
            },
            {"role": "tool", "tool_call_id": "call_agent1", "content": "r"},
            {"role": "tool", "tool_call_id": "Ab3dE6gH9", "content": "r"},
        ]
    }
    repaired = repair_request(body, MISTRAL)
    assistant, first, second = repaired.body["messages"][1:]
    mapped = assistant["tool_calls"][0]["id"]
    assert re.fullmatch(r"[A-Za-z0-9]{9}", mapped)
    assert first["tool_call_id"] == mapped
    assert assistant["tool_calls"][1]["id"] == second["tool_call_id"] == "Ab3dE6gH9"
    assert Repair.CALL_ID_NOT_MISTRAL in repaired.repairs
    # the next turn, with more history, maps the same id the same way (nothing remembered)
    body["messages"] += [{"role": "assistant", "content": "", "tool_calls": [call("toolu_next")]}]
    again = repair_request(body, MISTRAL).body["messages"]
    assert again[1]["tool_calls"][0]["id"] == mapped
    assert repair_request(body).body is body, "only where the template needs it"


def test_many_calls_in_one_conversation_get_distinct_valid_ids():
    n = 5000
    messages: list[dict[str, Any]] = [{"role": "user", "content": "u"}]
    for i in range(n):
        messages.append({"role": "assistant", "content": "", "tool_calls": [call(f"call_{i:06d}")]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i:06d}", "content": str(i)})
    repaired = repair_request({"messages": messages}, MISTRAL).body["messages"]
    targets = [m["tool_calls"][0]["id"] for m in repaired if m["role"] == "assistant"]
    assert len(set(targets)) == n
    assert all(ids.valid(t) for t in targets)
    assert [m["tool_call_id"] for m in repaired if m["role"] == "tool"] == targets


def test_a_target_taken_by_a_valid_id_is_drawn_again():
    first = ids.id_map(["call_x"])["call_x"]
    mapping = ids.id_map([first, "call_x"])
    assert first not in mapping
    assert mapping["call_x"] != first
    assert ids.valid(mapping["call_x"])


def tool_with(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"p": schema}}},
    }


def parameter(body: dict[str, Any], needs: TemplateNeeds) -> tuple[object, set[str]]:
    repaired = repair_request(body, needs)
    return repaired.body["tools"][0]["function"]["parameters"]["properties"]["p"], set(
        repaired.repairs
    )


@pytest.mark.parametrize(
    ("schema", "expected", "kinds"),
    [
        (
            {"type": ["string", "null"], "description": "d"},
            {"description": "d", "anyOf": [{"type": "string"}, {"type": "null"}]},
            {Repair.SCHEMA_TYPE_LIST},
        ),
        (
            {"type": "array", "items": {"type": ["integer", "null"]}},
            {
                "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "anyOf": [{"type": "array"}],
            },
            {Repair.SCHEMA_TYPE_LIST, Repair.SCHEMA_ARRAY_TYPE},
        ),
    ],
)
def test_command_r_gets_type_lists_and_arrays_in_an_anyof_without_loss(schema, expected, kinds):
    body = {"messages": [{"role": "user", "content": "u"}], "tools": [tool_with(schema)]}
    assert parameter(body, FAMILIES["command_r"]) == (expected, kinds)


def test_hermes_keeps_its_arrays_and_gets_its_type_lists_wrapped():
    body = {
        "messages": [{"role": "user", "content": "u"}],
        "tools": [tool_with({"type": "array", "items": {"type": "string"}})],
    }
    assert repair_request(body, FAMILIES["hermes"]).body is body


@pytest.mark.parametrize(
    ("schema", "expected", "kind"),
    [
        ({"type": ["null", "integer"]}, {"type": "integer"}, Repair.SCHEMA_TYPE_LIST),
        (
            {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Unit"},
            {"type": "string", "title": "Unit"},
            Repair.SCHEMA_UNION,
        ),
        (
            {"oneOf": [{"type": "null"}, {"type": "number", "minimum": 0}]},
            {"type": "number", "minimum": 0},
            Repair.SCHEMA_UNION,
        ),
        (
            {"description": "any"},
            {"description": "any", "type": "string"},
            Repair.SCHEMA_TYPE_MISSING,
        ),
        ({"enum": [1, 2]}, {"enum": [1, 2], "type": "integer"}, Repair.SCHEMA_TYPE_MISSING),
    ],
)
def test_seed_oss_gets_one_type_on_every_parameter(schema, expected, kind):
    body = {"messages": [{"role": "user", "content": "u"}], "tools": [tool_with(schema)]}
    assert parameter(body, FAMILIES["seed_oss"]) == (expected, {kind})


def test_a_schema_with_one_type_everywhere_is_left_as_it_is():
    body = {
        "messages": [{"role": "user", "content": "u"}],
        "tools": [tool_with({"type": "object", "properties": {"a": {"type": "string"}}})],
    }
    for family in ("command_r", "hermes", "seed_oss"):
        assert repair_request(body, FAMILIES[family]).body is body


def test_gemma2_hears_tool_calls_and_results_as_text():
    body = {
        "messages": [
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("a", "f", '{"x": 1}'), call("b", "g")],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ra"},
            {"role": "tool", "tool_call_id": "b", "content": "rb"},
        ]
    }
    repaired = repair_request(body, FAMILIES["gemma2"])
    assert repaired.body["messages"] == [
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": '{"name":"f","arguments":{"x":1}}\n\n{"name":"g","arguments":{}}',
        },
        {"role": "user", "content": "ra\n\nrb"},
    ]
    assert {Repair.TOOL_ROLE_UNSUPPORTED, Repair.SAME_ROLE_CONSECUTIVE} <= set(repaired.repairs)


def test_needs_are_recognised_from_the_templates_own_words():
    assert needs_of_template(
        '{{ raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}'
    ).mistral_ids
    assert needs_of_template("{{ raise_exception('System role not supported') }}").no_system_role
    assert needs_of_template("only supports single tool-calls at once").single_calls
    assert needs_of_template("{%- if basic_type_map[json_spec.type] is defined %}").schema_lookup
    assert needs_of_template("json_to_python_type(json_spec.items)").schema_arrays
    assert needs_of_template("{{ py_type(spec.type) }}").schema_single_types
    assert needs_of_template("{{ messages }}").no_tool_role
    assert needs_of_template("{{ messages }} {{ tools }}") == TemplateNeeds()


_ROLES_AND_TYPES = st.sampled_from(
    ["user", "assistant", "tool", "system", "developer", "function", "namespace", "custom",
     "message", "function_call", "custom_tool_call", "text", "input_text", "array", "null"]
)  # fmt: skip
_KEYS = st.sampled_from(
    ["role", "content", "tool_calls", "id", "tool_call_id", "function", "name", "arguments",
     "type", "tools", "input", "parameters", "properties", "anyOf", "items", "namespace",
     "text", "messages", "system", "call_id", "format", "enum"]
)  # fmt: skip
_JSON = st.recursive(
    # orjson reads a body's integers beyond 64 bits as floats, so no body holds a larger int
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.text(max_size=5)
    | _ROLES_AND_TYPES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=30,
)
_EVERY_NEED = TemplateNeeds(**{name: True for name in TemplateNeeds.__dataclass_fields__})


@given(
    st.dictionaries(
        st.sampled_from(["messages", "tools", "input", "text", "tool_choice", "system"]),
        _JSON,
        max_size=4,
    )
)
# tool_calls that is no list, under every template's rules (shrunk failures)
@example(body={"messages": [{"tool_calls": True}]})
@example(body={"messages": [{"role": "assistant", "tool_calls": 3}, {"role": "tool"}]})
def test_any_json_body_is_repaired_without_an_error_and_left_as_it_was(body: dict[str, Any]):
    """Wrong-typed fields anywhere (a list for a role, a number for an id): the repairers raise
    nothing, and the client's body is never changed in place."""
    before = copy.deepcopy(body)
    repair_request(body, _EVERY_NEED)
    repair_request(body)
    responses_native(body)
    messages_native(body)
    assert body == before
