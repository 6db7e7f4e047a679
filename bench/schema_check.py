"""``python -m bench.schema_check``: the libraries that could check and heal a call's arguments.

Issue 25 checks every tool call's arguments against its tool's JSON Schema at the call's end,
and heals almost-JSON when asked. This compares the candidates on what decides the choice:

* **cost**: compile time per schema, check time per call (valid and invalid arguments), on
  the tools real agents send (tests/fixtures/agent-tools/: Codex, Claude Code, OpenCode) and a
  schema of the shape MCP servers generate (pydantic: ``$defs``, ``$ref``, ``anyOf`` with null);
  memory per compiled schema (RSS growth over 300 distinct schemas, one process per library);
* **drafts**: five probes of draft 2020-12 semantics (``prefixItems``, ``$ref`` beside other
  keywords, ``unevaluatedProperties``, ``dependentRequired``, ``$defs``), with the agents'
  ``$schema`` (2020-12) and without one;
* **error kinds**: which keyword each library names for the mismatches the proxy counts;
* **risk**: a backtracking ``pattern`` (``^(a+)+$``) against model output, a small ``$ref``
  graph whose evaluation doubles per level, and a remote ``$ref`` (does it reach the network?);
* **healing**: the proxy's own rewrite (proxy/core/arguments/heal.py), json-repair,
  fast-json-repair, dirtyjson and json5 on the shapes of issue 25 (trailing commas, single
  quotes, Python literals, a raw newline in a string), on escapes that must keep their JSON
  meaning, and on truncation, and their speed on a 60 KB ``Write`` call.

Needs the bench extra (``pip install -e '.[bench]'``). ``--quick`` runs fewer iterations.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
AGENT_TOOLS = ROOT / "tests" / "fixtures" / "agent-tools"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

JSON = Any


@dataclass(frozen=True)
class Library:
    name: str
    compile: Callable[[JSON], Any]
    valid: Callable[[Any, JSON], bool]
    keyword: Callable[[Any, JSON], str]  # the keyword the library names for the first error


def _jsonschema() -> Library:
    import jsonschema
    from jsonschema.exceptions import best_match

    def compile_(schema: JSON) -> Any:
        return jsonschema.validators.validator_for(schema)(schema)

    def keyword(v: Any, instance: JSON) -> str:
        error = best_match(v.iter_errors(instance))
        return str(error.validator) if error is not None else "-"

    return Library("jsonschema", compile_, lambda v, i: bool(v.is_valid(i)), keyword)


def _fastjsonschema() -> Library:
    import fastjsonschema

    def compile_(schema: JSON) -> Any:
        # use_default=False: by default it writes the schema's defaults into the instance
        return fastjsonschema.compile(schema, use_default=False, use_formats=False)

    def valid(f: Any, instance: JSON) -> bool:
        try:
            f(instance)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    def keyword(f: Any, instance: JSON) -> str:
        try:
            f(instance)
        except fastjsonschema.JsonSchemaValueException as exc:
            return str(exc.rule)
        return "-"

    return Library("fastjsonschema", compile_, valid, keyword)


def _jsonschema_rs() -> Library:
    import jsonschema_rs

    def compile_(schema: JSON) -> Any:
        return jsonschema_rs.validator_for(
            schema,
            offline=True,
            validate_formats=False,
            pattern_options=jsonschema_rs.RegexOptions(),
        )

    def keyword(v: Any, instance: JSON) -> str:
        for error in v.iter_errors(instance):
            return str(error.kind.name)
        return "-"

    return Library("jsonschema-rs", compile_, lambda v, i: bool(v.is_valid(i)), keyword)


LIBRARIES: dict[str, Callable[[], Library]] = {
    "jsonschema": _jsonschema,
    "fastjsonschema": _fastjsonschema,
    "jsonschema-rs": _jsonschema_rs,
}


def agent_tools() -> dict[str, JSON]:
    """Every agent tool's schema by ``agent/tool``."""
    out: dict[str, JSON] = {}
    for path in sorted(AGENT_TOOLS.glob("*.json")):
        for tool in orjson.loads(path.read_bytes()):
            function = tool["function"]
            out[f"{path.stem.rsplit('-', 1)[0]}/{function['name']}"] = function["parameters"]
    return out


def mcp_schema() -> JSON:
    """A tool schema as FastMCP makes one from a function's typed parameters (pydantic)."""
    from typing import Literal

    from pydantic import BaseModel, Field

    class Filter(BaseModel):
        field: str
        op: Literal["eq", "ne", "lt", "gt", "contains"]
        value: str | int | float | None = None

    class Search(BaseModel):
        query: str = Field(description="What to search for")
        filters: list[Filter] = Field(default_factory=list)
        limit: int = Field(10, ge=1, le=100)
        cursor: str | None = None

    schema = Search.model_json_schema()
    schema["$schema"] = DRAFT_2020_12
    return schema


# (tool, arguments that fit, {kind: arguments that do not})
CALLS: list[tuple[str, JSON, dict[str, JSON]]] = [
    (
        "codex/exec_command",
        {"cmd": "ls -la", "workdir": "/repo", "login": False},
        {
            "required": {"workdir": "/repo"},
            "unknown-property": {"cmd": "ls", "command=ls": ""},
            "type": {"cmd": "ls", "max_output_tokens": "5"},
            "enum": {"cmd": "ls", "sandbox_permissions": "sudo"},
        },
    ),
    (
        "claude-code/Bash",
        {"command": "git status", "description": "Show the working tree status"},
        {"required": {}, "unknown-property": {"command": "ls", "cmd": "ls"}},
    ),
    (
        "claude-code/Edit",
        {"file_path": "/repo/a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"},
        {"required": {"file_path": "/repo/a.py", "old_string": "x"}},
    ),
    (
        "claude-code/Read",
        {"file_path": "/repo/README.md", "limit": 200},
        {"type": {"file_path": 3}},
    ),
    (
        "opencode/bash",
        {"command": "pytest -q", "description": "Run the tests"},
        {"type": {"command": "pytest", "description": "d", "timeout": "60"}},
    ),
    (
        "mcp/search",
        {"query": "proxy", "filters": [{"field": "lang", "op": "eq", "value": "py"}], "limit": 5},
        {"enum": {"query": "q", "filters": [{"field": "f", "op": "like"}]}},
    ),
]

KIND_OF_KEYWORD = {
    "required": "required",
    "additionalProperties": "unknown-property",
    "unevaluatedProperties": "unknown-property",
    "type": "type",
    "enum": "enum",
    "const": "enum",
}


def bound(fn: Callable[..., object], *args: object) -> Callable[[], object]:
    """``fn`` with its arguments bound now (a lambda in a loop would see the loop's last)."""
    return lambda: fn(*args)


def _compile_and_check(lib: Library, schema: JSON, instance: JSON) -> bool:
    return lib.valid(lib.compile(schema), instance)


def best_of(fn: Callable[[], object], number: int, repeat: int = 5) -> float:
    """Microseconds per call: the best of ``repeat`` runs of ``number`` calls."""
    number = max(number, 1)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / number * 1e6


def cost_table(libs: list[Library], schemas: dict[str, JSON], number: int) -> list[str]:
    rows = [
        "| tool | library | compile us | check us (fits) | check us (does not) | parse us |",
        "| --- | --- | --: | --: | --: | --: |",
    ]
    for tool, good, bad in CALLS:
        schema = schemas[tool]
        text = orjson.dumps(good)
        parse = best_of(bound(orjson.loads, text), number)
        for lib in libs:
            try:
                compiled = lib.compile(copy.deepcopy(schema))
                lib.valid(compiled, good)  # jsonschema resolves refs on first use
            except Exception as exc:
                rows.append(f"| {tool} | {lib.name} | fails: {type(exc).__name__} | | | |")
                continue
            compile_us = best_of(bound(_compile_and_check, lib, schema, good), number // 50, 3)
            fits = best_of(bound(lib.valid, compiled, good), number)
            wrong = next(iter(bad.values()))
            misfit = best_of(bound(lib.valid, compiled, wrong), number)
            ok = lib.valid(compiled, good) and not lib.valid(compiled, wrong)
            flag = "" if ok else " (wrong answer)"
            rows.append(
                f"| {tool} | {lib.name} | {compile_us:.1f} | {fits:.2f}{flag} | {misfit:.2f}"
                f" | {parse:.2f} |"
            )
    return rows


def proxy_table(schemas: dict[str, JSON], number: int) -> list[str]:
    """What proxy/core/arguments costs per call, everything in: finding the tool, the
    schema's cache entry (its bytes as the key, on the request's first call of the tool),
    parsing the arguments, the bound on the work, the check."""
    from proxy.core.arguments.schemas import SchemaCache
    from proxy.core.arguments.tools import RequestTools

    rows = [
        "| tool | tools of the request | first call in a request us | later calls us"
        " | mismatch us | fix of a fitting call us |",
        "| --- | --: | --: | --: | --: | --: |",
    ]
    for tool, good, bad in CALLS:
        name = tool.split("/")[1]
        tools = [{"type": "function", "function": {"name": name, "parameters": schemas[tool]}}]
        others = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(11)]
        request_tools = [*others, *tools]  # the called tool last of twelve, as agents send
        cache = SchemaCache()
        text = orjson.dumps(good).decode()
        wrong = orjson.dumps(next(iter(bad.values()))).decode()
        RequestTools.from_chat(request_tools, cache).check(name, text)  # compiled once

        def first(
            name: str = name,
            text: str = text,
            cache: SchemaCache = cache,
            request_tools: list[JSON] = request_tools,
        ) -> object:
            return RequestTools.from_chat(request_tools, cache).check(name, text)

        warm = RequestTools.from_chat(request_tools, cache)
        warm.check(name, text)
        rows.append(
            f"| {tool} | {len(request_tools)} | {best_of(first, number):.2f}"
            f" | {best_of(bound(warm.check, name, text), number):.2f}"
            f" | {best_of(bound(warm.check, name, wrong), number):.2f}"
            f" | {best_of(bound(_fix_fitting, warm, name, text), number):.2f} |"
        )
    return rows


def _fix_fitting(tools: Any, name: str, text: str) -> object:
    return tools.fix(name, text, cut=False, heal=True, coerce=True)


def kinds_table(libs: list[Library], schemas: dict[str, JSON]) -> list[str]:
    rows = ["| tool | mismatch | " + " | ".join(lib.name for lib in libs) + " |"]
    rows.append("| --- | --- |" + " --- |" * len(libs))
    for tool, _good, bad in CALLS:
        for kind, instance in bad.items():
            cells = []
            for lib in libs:
                try:
                    word = lib.keyword(lib.compile(schemas[tool]), instance)
                except Exception as exc:
                    word = type(exc).__name__
                mark = "" if KIND_OF_KEYWORD.get(word) == kind else " (other)"
                cells.append(f"`{word}`{mark}")
            rows.append(f"| {tool} | {kind} | " + " | ".join(cells) + " |")
    return rows


# (what, schema without $schema, instance, valid under 2020-12)
DRAFT_PROBES: list[tuple[str, JSON, JSON, bool]] = [
    ("prefixItems", {"prefixItems": [{"type": "string"}], "items": False}, [1], False),
    (
        "$ref beside maxLength",
        {
            "$defs": {"s": {"type": "string"}},
            "properties": {"a": {"$ref": "#/$defs/s", "maxLength": 2}},
        },
        {"a": "abc"},
        False,
    ),
    (
        "unevaluatedProperties",
        {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False},
        {"a": 1, "b": 2},
        False,
    ),
    ("dependentRequired", {"dependentRequired": {"a": ["b"]}}, {"a": 1}, False),
    (
        "$defs",
        {"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}},
        {"n": "x"},
        False,
    ),
]


def drafts_table(libs: list[Library]) -> list[str]:
    rows = ["| probe | `$schema` | " + " | ".join(lib.name for lib in libs) + " |"]
    rows.append("| --- | --- |" + " --- |" * len(libs))
    for what, schema, instance, expected in DRAFT_PROBES:
        for declared in (True, False):
            full = {"$schema": DRAFT_2020_12, **schema} if declared else schema
            cells = []
            for lib in libs:
                try:
                    got = lib.valid(lib.compile(full), instance)
                    cells.append("right" if got == expected else "**wrong**")
                except Exception as exc:
                    cells.append(f"fails: {type(exc).__name__}")
            label = "2020-12" if declared else "absent"
            rows.append(f"| {what} | {label} | " + " | ".join(cells) + " |")
    return rows


def _timed(fn: Callable[[], object]) -> str:
    start = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:
        return f"fails: {type(exc).__name__}: {str(exc).splitlines()[0][:60]}"
    took = time.perf_counter() - start
    return f"{took * 1e3:.2f} ms ({'fits' if result else 'does not fit'})"


def dag_schema(levels: int) -> JSON:
    """``levels`` definitions, each an ``anyOf`` of the next one twice: 2^levels paths."""
    defs: dict[str, JSON] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def risk_table(libs: list[Library]) -> list[str]:
    """Each case grows until one run of it takes a second; larger sizes are then skipped."""
    rows = ["| case | " + " | ".join(lib.name for lib in libs) + " |"]
    rows.append("| --- |" + " --- |" * len(libs))
    redos = {"type": "string", "pattern": "^(a+)+$"}
    cases: list[tuple[str, JSON, JSON]] = []
    for n in (16, 20, 24):
        cases.append((f"`^(a+)+$` against {n} a's and `!`", redos, "a" * n + "!"))
    for levels in (12, 18, 24):
        size = len(json.dumps(dag_schema(levels)))
        label = f"`$ref` graph of {levels} levels ({size} bytes), against `5`"
        cases.append((label, dag_schema(levels), 5))
    remote = {"$ref": "http://127.0.0.1:9/schema.json"}  # loopback, a port nothing serves
    cases.append(("remote `$ref` (127.0.0.1:9)", remote, 1))
    slow: set[tuple[str, str]] = set()
    for label, schema, instance in cases:
        cells = []
        family = label.split(" ")[0]
        for lib in libs:
            if (lib.name, family) in slow:
                cells.append("not run (a smaller one took > 1 s)")
                continue
            start = time.perf_counter()
            cells.append(_timed(bound(_compile_and_check, lib, schema, instance)))
            if time.perf_counter() - start > 1.0:
                slow.add((lib.name, family))
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return rows


def memory_kb(lib_name: str, count: int = 300) -> float:
    """RSS growth per compiled schema, in this process: run it as a subprocess."""
    lib = LIBRARIES[lib_name]()
    schemas = list(agent_tools().values())
    copies = [
        {**copy.deepcopy(schemas[i % len(schemas)]), "title": f"copy {i}"} for i in range(count)
    ]
    keep = []
    gc.collect()
    before = _rss_kb()
    for schema in copies:
        compiled = lib.compile(schema)
        lib.valid(compiled, {})
        keep.append(compiled)
    gc.collect()
    return (_rss_kb() - before) / count


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE") // 1024


def memory_row(names: list[str]) -> list[str]:
    cells = []
    for name in names:
        done = subprocess.run(
            [sys.executable, "-m", "bench.schema_check", "--memory-of", name],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        )
        cells.append(f"{float(done.stdout):.1f}")
    return [
        "| | " + " | ".join(names) + " |",
        "| --- |" + " --: |" * len(names),
        "| KB per compiled agent schema | " + " | ".join(cells) + " |",
    ]


# The shapes of issue 25: (what, text, what it should heal to; None: must not be healed)
HEAL_SHAPES: list[tuple[str, str, JSON]] = [
    (
        "trailing commas",
        '{"cmd": "ls", "args": ["-l", "-a",],}',
        {"cmd": "ls", "args": ["-l", "-a"]},
    ),
    ("single quotes", "{'cmd': 'ls -l', 'n': 2}", {"cmd": "ls -l", "n": 2}),
    ("Python literals", '{"a": True, "b": None, "c": False}', {"a": True, "b": None, "c": False}),
    ("raw newline in a string", '{"content": "line 1\nline 2"}', {"content": "line 1\nline 2"}),
    ("apostrophe in double quotes", '{"msg": "it\'s",}', {"msg": "it's"}),
    ("a string ending in a newline", '{"content": "line\\n",}', {"content": "line\n"}),
    ("escaped slash and form feed", '{"p": "a\\/b\\f",}', {"p": "a/b\f"}),
    ("a surrogate pair", '{"e": "\\ud83d\\ude00",}', {"e": "\U0001f600"}),
    ("cut in a string", '{"cmd": "rm -rf /tmp/build', None),
    ("cut after a member", '{"cmd": "ls", "n": 2', None),
]


def _healers() -> dict[str, Callable[[str], JSON]]:
    from proxy.core.arguments.heal import healed_value

    healers: dict[str, Callable[[str], JSON]] = {"the proxy (heal.py)": healed_value}
    try:
        import json_repair

        healers["json-repair"] = lambda text: json_repair.loads(text)
    except ImportError:
        pass
    try:
        import fast_json_repair

        healers["fast-json-repair"] = lambda text: fast_json_repair.loads(text)
    except ImportError:
        pass
    try:
        import dirtyjson

        healers["dirtyjson"] = lambda text: dirtyjson.loads(text)
    except ImportError:
        pass
    try:
        import json5

        healers["json5"] = lambda text: json5.loads(text)
    except ImportError:
        pass
    return healers


def _plain(value: JSON) -> JSON:
    return orjson.loads(orjson.dumps(value, default=dict))


def heal_table(number: int) -> list[str]:
    healers = _healers()
    rows = ["| shape | " + " | ".join(healers) + " |", "| --- |" + " --- |" * len(healers)]
    for what, text, expected in HEAL_SHAPES:
        cells = []
        for heal in healers.values():
            try:
                got = _plain(heal(text))
            except Exception as exc:
                cells.append(f"fails ({type(exc).__name__})")
                continue
            if got is None:
                cells.append("leaves it" if expected is None else "**leaves it**")
            elif expected is None:
                cells.append(f"completes it: `{orjson.dumps(got).decode()}`")
            else:
                cells.append("right" if got == expected else f"**wrong**: `{got}`")
        rows.append(f"| {what} | " + " | ".join(cells) + " |")
    # 60 KB: under the proxy's cap (heal.HEAL_MAX_CHARS)
    big = '{"file_path": "/repo/big.txt", "content": "' + "a line of text\n" * 4_000 + '",}'
    cells = []
    for heal in healers.values():
        try:
            us = best_of(bound(heal, big), max(number // 2000, 1), 3)
            cells.append(f"{us / 1e3:.1f} ms")
        except Exception as exc:
            cells.append(f"fails ({type(exc).__name__})")
    rows.append(f"| {len(big) // 1000} KB `Write` call, raw newlines | " + " | ".join(cells) + " |")
    small = HEAL_SHAPES[1][1]
    cells = [f"{best_of(bound(h, small), number // 10):.1f} us" for h in healers.values()]
    rows.append("| time per heal (single quotes) | " + " | ".join(cells) + " |")
    return rows


def versions(names: list[str]) -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for name in [*names, "json-repair", "fast-json-repair", "dirtyjson", "json5", "orjson"]:
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            parts.append(f"{name} (not installed)")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.schema_check", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer iterations (numbers are noisier)")
    p.add_argument("--number", type=int, help="calls per timing (default 20,000; quick 2,000)")
    p.add_argument(
        "--libraries", default=",".join(LIBRARIES), help="validators to compare, comma-separated"
    )
    p.add_argument("--memory-of", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_of:
        print(memory_kb(args.memory_of))
        return 0
    number = args.number or (2_000 if args.quick else 20_000)
    libs: list[Library] = []
    for name in args.libraries.split(","):
        try:
            libs.append(LIBRARIES[name]())
        except ImportError:
            print(f"{name}: not installed (pip install -e '.[bench]'), left out")
    names = [lib.name for lib in libs]
    schemas = {**agent_tools(), "mcp/search": mcp_schema()}
    print(f"{versions(names)}; Python {sys.version.split()[0]}\n")
    for title, rows in (
        ("Cost per schema and per call", cost_table(libs, schemas, number)),
        ("The proxy's check (jsonschema-rs), per call", proxy_table(schemas, number)),
        ("Memory", memory_row(names)),
        ("Draft 2020-12", drafts_table(libs)),
        ("Error kinds", kinds_table(libs, schemas)),
        ("Risk", risk_table(libs)),
        ("Healing", heal_table(number)),
    ):
        print(f"### {title}\n")
        print("\n".join(rows))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
