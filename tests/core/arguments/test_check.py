"""The schema check: what kind of mismatch a call's arguments are, against the tools real
agents send, and what is never checked (issue 25 item 1)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

import pytest

from proxy.core.arguments.check import Mismatch, MismatchKind
from proxy.core.arguments.schemas import SchemaCache
from proxy.core.arguments.tools import RequestTools
from proxy.core.repairs import Repair
from tests.core.arguments.tools import agent_tools


@pytest.fixture
def cache() -> SchemaCache:
    return SchemaCache()


def kind(tools: RequestTools, name: str, arguments: str) -> str | None:
    found = tools.check(name, arguments)
    return None if found is None else found.kind.value


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("exec_command", '{"cmd": "ls -la", "workdir": "/repo"}', None),
        # vllm#56077: speculative decoding's `{"command=ls": ""}`; a required key missing wins
        ("exec_command", '{"command=ls": ""}', "required"),
        ("exec_command", "{}", "required"),
        ("exec_command", '{"cmd": "ls", "color": true}', "unknown-property"),
        ("exec_command", '{"cmd": "ls", "max_output_tokens": "5"}', "type"),
        ("exec_command", '{"cmd": "ls", "sandbox_permissions": "root"}', "enum"),
        ("exec_command", '["ls"]', "type"),
        ("shell", '{"cmd": "ls"}', "unknown-tool"),
        # the namespace's functions, as the Responses translation named them
        ("multi_agent_v1__wait_agent", '{"targets": []}', None),
    ],
)
def test_codex_calls_are_checked_against_its_tools(cache, name, arguments, expected):
    tools = RequestTools.from_chat(agent_tools("codex"), cache)
    assert kind(tools, name, arguments) == expected


def test_claude_codes_draft_2020_12_schemas_are_checked(cache):
    tools = RequestTools.from_chat(agent_tools("claude-code"), cache)
    assert kind(tools, "Bash", '{"command": "git status"}') is None
    assert kind(tools, "Bash", '{"cmd": "git status"}') == "required"
    assert kind(tools, "Read", '{"file_path": "/a", "limit": 0}') == "other"  # exclusiveMinimum
    assert kind(tools, "Edit", '{"file_path": "/a", "old_string": "x"}') == "required"
    assert cache.stats.uncompilable == 0


def test_a_mismatch_is_labelled_as_the_dialect_kinds_are(cache):
    tools = RequestTools.from_chat(agent_tools("opencode"), cache)
    found = tools.check("bash", '{"command": "ls", "description": "d", "timeout": "60"}')
    assert found is not None
    assert found.label == "args-schema-mismatch:type"
    assert found.label.partition(":")[0] == Repair.ARGS_SCHEMA_MISMATCH
    assert {k.value for k in MismatchKind} == {
        "unknown-tool",
        "required",
        "unknown-property",
        "type",
        "enum",
        "other",
    }


def test_arguments_that_are_no_json_are_left_to_args_not_json(cache):
    tools = RequestTools.from_chat(agent_tools("codex"), cache)
    assert tools.check("exec_command", '{"cmd": "ls",}') is None
    assert tools.check("exec_command", '{"cmd": "l') is None


def test_a_tool_without_parameters_takes_any_arguments(cache):
    tools = RequestTools.from_chat([{"type": "function", "function": {"name": "now"}}], cache)
    assert tools.check("now", '{"anything": 1}') is None
    assert tools.check("later", "{}") is not None


def test_the_first_tool_of_a_name_is_the_one_checked(cache):
    first = {"type": "function", "function": {"name": "f", "parameters": {"required": ["a"]}}}
    second = {"type": "function", "function": {"name": "f", "parameters": {}}}
    tools = RequestTools.from_chat([first, second], cache)
    assert kind(tools, "f", "{}") == "required"


def test_responses_tools_are_read_as_their_translation_maps_them(cache):
    tools = RequestTools.from_responses(
        [
            {"type": "web_search"},  # hosted: no calls to check
            {"type": "function", "name": "get", "parameters": {"required": ["id"]}},
            {"type": "custom", "name": "apply_patch", "description": "a patch"},
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]},
            {"type": "function"},  # no name: what the translation refuses, skipped here
        ],
        cache,
    )
    assert kind(tools, "get", '{"id": 1}') is None
    assert kind(tools, "get", "{}") == "required"
    assert kind(tools, "apply_patch", '{"input": "*** Begin Patch"}') is None
    assert kind(tools, "apply_patch", '{"patch": "x"}') == "required"
    assert kind(tools, "ns__f", '{"a": 1}') is None
    assert kind(tools, "web_search", "{}") == "unknown-tool"


def test_messages_tools_are_read_as_their_translation_maps_them(cache):
    tools = RequestTools.from_messages(
        [
            {"type": "web_search_20250305", "name": "web_search"},  # a server tool
            {"name": "Bash", "input_schema": {"type": "object", "required": ["command"]}},
            {"name": "", "input_schema": {}},  # refused by the translation, skipped here
        ],
        cache,
    )
    assert kind(tools, "Bash", '{"command": "ls"}') is None
    assert kind(tools, "Bash", "{}") == "required"
    assert kind(tools, "web_search", "{}") == "unknown-tool"


class ReadCounting(Sequence[Any]):
    """A request's tools that remembers which entries were read."""

    def __init__(self, length: int, make: Any) -> None:
        self.length = length
        self.make = make
        self.read: set[int] = set()

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        assert isinstance(index, int)
        self.read.add(index)
        return self.make(index)

    def __iter__(self) -> Iterator[Any]:
        raise AssertionError("the whole list was walked")


def function(index: int) -> dict[str, Any]:
    return {"type": "function", "function": {"name": f"f{index}", "parameters": {}}}


def test_a_request_of_a_million_tools_costs_nothing_until_a_call_and_then_only_its_own(cache):
    many = ReadCounting(1_500_000, function)
    tools = RequestTools.from_chat(many, cache)
    assert many.read == set()
    assert tools.check("f3", "{}") is None
    assert many.read == {0, 1, 2, 3}
    assert tools.check("f1", "{}") is None  # already seen: nothing more is read
    assert tools.check("f5", "{}") is None
    assert many.read == set(range(6))


def test_one_schema_is_compiled_once_for_every_request_that_calls_it(cache):
    for _ in range(3):
        tools = RequestTools.from_chat(agent_tools("codex"), cache)
        assert tools.check("exec_command", '{"cmd": "ls"}') is None
    assert cache.stats.compiled == 1
    assert len(cache) == 1  # only the tool that was called, of twelve


def test_the_cache_is_bounded_and_forgets_the_least_recently_used():
    cache = SchemaCache(max_entries=2)
    for n in range(3):
        tools = RequestTools.from_chat([tool_with({"maxProperties": n + 1})], cache)
        tools.check("f", "{}")
    assert len(cache) == 2
    tools = RequestTools.from_chat([tool_with({"maxProperties": 1})], cache)
    tools.check("f", "{}")
    assert cache.stats.compiled == 4  # the first had gone, and was compiled again


def test_the_cache_is_bounded_by_the_bytes_of_its_schemas():
    cache = SchemaCache(max_bytes=200)
    for n in range(5):
        tools = RequestTools.from_chat(
            [tool_with({"description": "d" * 60, "maxProperties": n + 1})], cache
        )
        tools.check("f", "{}")
    assert len(cache) == 2


def tool_with(parameters: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "text"},  # not a JSON Schema type
        {"properties": {"s": {"type": "string", "pattern": "(?=a)b"}}},  # needs backtracking
        {"properties": {"s": {"type": "string", "pattern": "(\\w)\\1"}}},  # a back-reference
        {"$ref": "#/$defs/missing"},
        {"$schema": "https://example.com/my-own-meta-schema"},
    ],
    ids=["bad-type", "look-ahead", "back-reference", "dangling-ref", "unknown-meta-schema"],
)
def test_a_schema_that_does_not_compile_is_skipped_and_counted_once_per_process(cache, schema):
    for _ in range(3):
        tools = RequestTools.from_chat([tool_with(schema)], cache)
        assert tools.check("f", '{"s": "b"}') is None
        assert tools.fix("f", '{"s": "b",}', cut=False, heal=True, coerce=True) is None
    assert cache.stats.uncompilable == 1


def test_an_uncompilable_schema_is_counted_once_even_after_it_was_evicted():
    cache = SchemaCache(max_entries=1)
    for schema in ({"type": "text"}, {"type": "object"}, {"type": "text"}):
        RequestTools.from_chat([tool_with(schema)], cache).check("f", "{}")
    assert cache.stats.uncompilable == 1


def test_an_oversized_schema_is_not_compiled():
    cache = SchemaCache(max_schema_bytes=100)
    tools = RequestTools.from_chat(
        [tool_with({"description": "d" * 200, "required": ["a"]})], cache
    )
    assert tools.check("f", "{}") is None
    assert (cache.stats.oversized, cache.stats.compiled) == (1, 0)


def test_a_reference_to_another_document_is_never_fetched(cache):
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.5)
        port = server.getsockname()[1]
        schema = {"properties": {"a": {"$ref": f"http://127.0.0.1:{port}/schema.json"}}}
        tools = RequestTools.from_chat([tool_with(schema)], cache)
        assert tools.check("f", '{"a": 1}') is None
        with pytest.raises(TimeoutError):
            server.accept()
    assert cache.stats.uncompilable == 1


def test_a_backtracking_pattern_runs_in_linear_time_against_model_output(cache):
    """``^(a+)+$`` against 30 a's and a ``!`` takes Python's re about a minute
    (bench/schema_check.py: 1.4 s at 24); the check must simply come back."""
    schema = {"properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    tools = RequestTools.from_chat([tool_with(schema)], cache)
    done = threading.Event()
    found: list[Mismatch | None] = []

    def run() -> None:
        found.append(tools.check("f", '{"s": "' + "a" * 30 + '!"}'))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(10), "the pattern check did not come back"
    assert [f.kind.value for f in found if f is not None] == ["other"]


def test_format_is_an_annotation_not_a_check(cache):
    schema = {"properties": {"url": {"type": "string", "format": "uri"}}}
    tools = RequestTools.from_chat([tool_with(schema)], cache)
    assert tools.check("f", '{"url": "not a uri"}') is None


def dag(levels: int) -> dict[str, Any]:
    """An anyOf of two references to the next definition, ``levels`` deep: 2^levels paths."""
    defs: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}}}


def test_a_check_whose_work_doubles_per_level_is_skipped_before_it_runs(cache):
    tools = RequestTools.from_chat([tool_with(dag(40), "big"), tool_with(dag(6), "small")], cache)
    assert tools.check("big", '{"a": 5}') is None  # 2^40 applications: never run
    assert cache.stats.too_costly == 1
    assert kind(tools, "small", '{"a": 5}') == "other"  # 2^6: checked
    assert cache.stats.too_costly == 1


def test_a_recursive_schema_is_checked_against_a_shallow_value_and_not_a_deep_fan_out(cache):
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["name"],
            }
        },
        "$ref": "#/$defs/node",
    }
    tools = RequestTools.from_chat([tool_with(tree, "tree")], cache)
    assert tools.check("tree", '{"name": "a", "children": [{"name": "b"}]}') is None
    assert kind(tools, "tree", '{"name": "a", "children": [{}]}') == "required"
    # an anyOf of two recursive arms: four times the work per level of the value
    doubling = {"anyOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}, "maxItems": 9}]}
    tools = RequestTools.from_chat([tool_with({"properties": {"v": doubling}}, "g")], cache)
    deep = '{"v": ' + "[" * 30 + "1" + "]" * 30 + "}"
    assert tools.check("g", deep) is None
    assert cache.stats.too_costly == 1
    assert tools.check("g", '{"v": [[1]]}') is None  # shallow: checked, and it fits
    assert cache.stats.too_costly == 1


def test_why_is_asked_only_when_the_answer_is_cheap(cache):
    """jsonschema-rs builds an error for every path through the anyOfs when asked why (0.7 s
    for 14 levels, against 0.2 ms to say that it does not fit): past the branch bound the
    mismatch is still counted, as "other"."""
    small = {**dag(2), "required": ["b"]}
    large = {**dag(14), "required": ["b"]}
    tools = RequestTools.from_chat([tool_with(small, "small"), tool_with(large, "large")], cache)
    assert kind(tools, "small", '{"a": 5}') == "required"
    done = threading.Event()
    found: list[Mismatch | None] = []

    def run() -> None:
        found.append(tools.check("large", '{"a": 5}'))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(10), "naming the kind did not come back"
    assert [f.kind.value for f in found if f is not None] == ["other"]
    assert cache.stats.too_costly == 0  # it was checked: only the why was skipped
