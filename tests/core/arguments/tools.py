"""The agents' real tools (tests/fixtures/agent-tools/), and values that fit their schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

AGENT_TOOLS = Path(__file__).resolve().parents[2] / "fixtures" / "agent-tools"


def agent_tools(agent: str) -> list[dict[str, Any]]:
    """``codex``, ``claude-code`` or ``opencode``: its chat ``tools``."""
    [path] = AGENT_TOOLS.glob(f"{agent}-*.json")
    tools: list[dict[str, Any]] = orjson.loads(path.read_bytes())
    return tools


def every_tool() -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """(agent, its tools, one tool) for each tool of each agent."""
    return [
        (agent, tools, tool)
        for agent in ("codex", "claude-code", "opencode")
        for tools in [agent_tools(agent)]
        for tool in tools
    ]


_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)  # no lone surrogates
_SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "string": _TEXT,
    "integer": st.integers(-(2**40), 2**40),
    "number": st.floats(allow_nan=False, allow_infinity=False, width=32) | st.integers(-99, 99),
    "boolean": st.booleans(),
    "null": st.none(),
}


def fitting(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of the keywords the agents' schemas use (type, properties, required, enum,
    items, bounds); the caller keeps those the validator accepts."""
    if not isinstance(schema, dict) or depth > 6:
        return st.none()
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    types = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(types, list):
        return st.one_of(*(fitting({**schema, "type": t}, depth) for t in types))
    if types == "object":
        properties = schema.get("properties", {})
        required = [key for key in schema.get("required", []) if key in properties]
        optional = [key for key in properties if key not in required]
        return st.fixed_dictionaries(
            {key: fitting(properties[key], depth + 1) for key in required},
            optional={key: fitting(properties[key], depth + 1) for key in optional},
        )
    if types == "array":
        return st.lists(fitting(schema.get("items", {}), depth + 1), max_size=3)
    if types in ("integer", "number") and ("minimum" in schema or "maximum" in schema):
        bounds: dict[str, Any] = {"minimum": -(2**20), "maximum": 2**20, **schema}
        low = int(bounds.get("exclusiveMinimum", bounds["minimum"]))
        high = int(bounds["maximum"])
        return st.integers(low + 1, high)
    return _SCALARS.get(types, st.none())


def arguments_texts(value: Any) -> st.SearchStrategy[str]:
    """The value as a server may write it: compact, spaced, indented, keys in their order."""
    return st.sampled_from(
        [
            orjson.dumps(value).decode(),
            orjson.dumps(value, option=orjson.OPT_INDENT_2).decode(),
            orjson.dumps(value).decode().replace(",", ", ").replace(":", ": "),
        ]
    )
