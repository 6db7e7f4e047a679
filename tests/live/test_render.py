"""The corpus rendered through every template of llama.cpp's tree with jinja2, as vLLM and
SGLang render templates (render.py: no help from llama.cpp's template engine), before and
after the request repairs: every refusal the repairs claim is gone, and no request the
template took before is refused after.

"Before" is each request as the proxy sent it before the request repairs (the client's chat
request as it came; a Responses or Messages request as translated); "after" is what it sends
now, with the template's needs recognised from the template itself (as from llama-server's
/props, or as the operator names the family for vLLM and SGLang)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Final

from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from proxy.core.request_repairs.needs import needs_of_template
from proxy.core.request_repairs.repair import repair_request
from tests.live.corpus import Recorded, load
from tests.live.render import TemplateRefusal, render
from tests.live.server import Build

#: the refusals the request repairs remove (docs/repairs.md, "What it repairs in requests")
CLAIMED: Final = {
    "system-not-first": r"System message must be at the beginning|Invalid message role",
    "roles alternate": r"roles must alternate",
    "mistral ids": r"Tool call IDs should be alphanumeric strings with length 9",
    "no system role": r"System role not supported",
    "content null": r"NoneType|'None' has no attribute|None has no element",
    "single calls": r"only supports single tool-calls",
}
#: refusals under jinja2 that no request repair claims, and why
UNCLAIMED: Final = {
    # transformers' ImmutableSandboxedEnvironment forbids list.append; Kimi K2's copies call it
    "sandbox": r"SecurityError: access to attribute 'append'",
    # the template joins arguments as a string, and vLLM and SGLang give it an object
    "arguments as objects": r"can only concatenate str \(not \"dict\"\) to str",
    # Gemma 2 has no tool role: tool messages break its alternation under a strict renderer
    # (llama.cpp's engine turns them into user messages); a tools conversation is not its use
    "gemma 2 tool messages": r"Conversation roles must alternate",
    # images under a text-only template (a text-only server refuses them before any template)
    "images": r"can only concatenate str \(not \"list\"\)|'list object' has no attribute"
    r"|NoneType' object is not iterable|Invalid user message|Unsupported user content block",
    # Command-R+ renders every parameter's description and the pydantic tool has none
    "parameter description": r"has no attribute 'description'",
}


def before(recorded: Recorded) -> dict[str, Any]:
    if recorded.protocol == "completions":
        return recorded.body
    to_chat = CLIENT_PROTOCOLS[recorded.protocol].to_chat
    assert to_chat is not None
    return to_chat(recorded.body).body


def outcome(template: Any, chat: dict[str, Any]) -> str | None:
    try:
        render(template, chat)
    except TemplateRefusal as exc:
        return str(exc)
    return None


def test_the_repairs_remove_every_claimed_refusal_under_a_strict_renderer(llama_build: Build):
    # the templates jinja2 renders at all: a plain question with one fully described tool
    # (llama.cpp's own deepseek-r1 copy pipes a generator to tojson, firefunction-v2 wants a
    # `functions` variable of its server's making)
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "description": "d",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "string", "description": "a"}},
            },
        },
    }
    plain = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    templates = [t for t in llama_build.templates() if outcome(t, plain) is None]
    assert len(templates) >= 60, "llama.cpp's tree holds about 70 templates"
    claimed_before: Counter[str] = Counter()
    problems = []
    for recorded in load():
        chat = before(recorded)
        for template in templates:
            refused = outcome(template, chat)
            repaired = repair_request(chat, needs_of_template(template.read_text())).body
            still = outcome(template, repaired)
            where = f"{recorded.name} under {template.stem}"
            claim = next((k for k, p in CLAIMED.items() if refused and re.search(p, refused)), None)
            if (
                refused
                and claim
                and not (claim == "roles alternate" and "gemma-2" in template.stem and still)
            ):
                claimed_before[claim] += 1
            if still is None:
                continue
            if refused is None:
                problems.append(f"{where}: rendered before the repairs, refused after: {still}")
            elif not any(re.search(p, still) for p in UNCLAIMED.values()):
                problems.append(f"{where}: still refused: {still[:200]}")
    assert problems == []
    # the claimed refusals are real: each one shows up before the repairs
    assert set(claimed_before) == set(CLAIMED), claimed_before
