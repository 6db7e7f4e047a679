"""Responses streams as payload lists, and the ways servers break them (docs/quirks.md R1-R10).

Each variant takes a canonical stream's payloads and returns them the way the quirk's server
sends them; ``sse`` writes payloads back as an upstream would (``event:`` lines optional).
Canonical streams come from the recordings in tests/fixtures/protocols/ or, for shapes no
recording has (markup in text, a call without a name), from the translate encoder fed neutral
events.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proxy.core.events import StreamEvent
from proxy.core.protocols.responses.context import ResponsesContext
from proxy.core.protocols.responses.encode import ResponsesEncoder
from tests.core.protocols.responses.checker import parse

Payloads = list[dict[str, Any]]
FIXTURES = Path(__file__).parents[3] / "fixtures" / "protocols"


def recorded(name: str) -> Payloads:
    return [p for _, p in parse((FIXTURES / name).read_bytes())]


def encoded(events: list[StreamEvent]) -> Payloads:
    counter = itertools.count(1)
    encoder = ResponsesEncoder(ResponsesContext(model="m"), lambda: f"u{next(counter):04d}")
    body = b"".join(b for event in events for b in encoder.feed(event))
    return [p for _, p in parse(body)]


def sse(payloads: Payloads, *, event_lines: bool = True) -> bytes:
    out = []
    for payload in payloads:
        head = f"event: {payload['type']}\n" if event_lines else ""
        data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        out.append(head + "data: " + data + "\n\n")
    return "".join(out).encode()


def renumber(payloads: Payloads) -> Payloads:
    for n, payload in enumerate(payloads):
        payload["sequence_number"] = n
    return payloads


def _copy(payloads: Payloads) -> Payloads:
    return copy.deepcopy(payloads)


def args_only_in_done(payloads: Payloads) -> Payloads:
    """Quirk 1 (LM Studio): no argument deltas."""
    kept = [p for p in _copy(payloads) if p["type"] != "response.function_call_arguments.delta"]
    return renumber(kept)


def rotating_ids(payloads: Payloads) -> Payloads:
    """Quirk 2 (GitHub Copilot): item and response ids new on every event."""
    out = _copy(payloads)
    for n, payload in enumerate(out):
        if isinstance(payload.get("item_id"), str):
            payload["item_id"] += f"_r{n}"
        if isinstance(payload.get("item"), dict):
            payload["item"]["id"] += f"_r{n}"
        if isinstance(payload.get("response"), dict):
            payload["response"]["id"] += f"_r{n}"
    return out


def no_item_done_for_calls(payloads: Payloads) -> Payloads:
    """Quirk 3 (SGLang router): no output_item.done for calls, completed.output one empty message."""
    out = [
        p
        for p in _copy(payloads)
        if not (p["type"] == "response.output_item.done" and p["item"]["type"] == "function_call")
    ]
    empty = {
        "id": "msg_empty",
        "type": "message",
        "status": "completed",
        "content": [],
        "role": "assistant",
    }
    out[-1]["response"]["output"] = [empty]
    return renumber(out)


def content_index_per_delta(payloads: Payloads) -> Payloads:
    """Quirk 5 (early vLLM): content_index up on every text delta, item_id empty."""
    out = _copy(payloads)
    deltas = 0
    for payload in out:
        if payload["type"] == "response.output_text.delta":
            payload["content_index"] = deltas
            payload["item_id"] = ""
            deltas += 1
    return out


def empty_call_id_and_name(payloads: Payloads) -> Payloads:
    """Quirk 6: empty call_id and name in output_item.added (the done has them)."""
    out = _copy(payloads)
    for payload in out:
        if (
            payload["type"] == "response.output_item.added"
            and payload["item"]["type"] == "function_call"
        ):
            payload["item"]["call_id"] = ""
            payload["item"]["name"] = ""
    return out


def empty_name_in_done(payloads: Payloads) -> Payloads:
    """Quirk 6: an empty name in output_item.done."""
    out = _copy(payloads)
    for payload in out:
        if (
            payload["type"] == "response.output_item.done"
            and payload["item"]["type"] == "function_call"
        ):
            payload["item"]["name"] = ""
    return out


def bare_completed(payloads: Payloads) -> Payloads:
    """Quirk 7: response.completed without output or usage; created without model."""
    out = _copy(payloads)
    del out[-1]["response"]["output"]
    del out[-1]["response"]["usage"]
    del out[0]["response"]["model"]
    return out


def deltas_without_added(payloads: Payloads) -> Payloads:
    """Quirk 7: text deltas with no output_item.added (nor content_part.added) before them."""
    drop = ("response.output_item.added", "response.content_part.added")
    return renumber([p for p in _copy(payloads) if p["type"] not in drop])


def nonstandard_names(payloads: Payloads) -> Payloads:
    """Quirk 8: response.reasoning.delta for the reasoning summary's deltas."""
    out = _copy(payloads)
    for payload in out:
        if payload["type"] == "response.reasoning_summary_text.delta":
            payload["type"] = "response.reasoning.delta"
    return out


def parallel_wrapper(payloads: Payloads) -> Payloads:
    """Quirk 9: the model's parallel wrapper as one call to a function named ``parallel``."""
    out = _copy(payloads)
    for payload in out:
        item = payload.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            item["name"] = "parallel"
    for item in out[-1]["response"]["output"]:
        if item["type"] == "function_call":
            item["name"] = "parallel"
    return out


def llamacpp(payloads: Payloads) -> Payloads:
    """llama.cpp's own endpoint (docs/quirks.md, "llama.cpp's own endpoints"): no sequence_number, no output_index on
    added/done, no function_call_arguments.done, text events without logprobs and
    content_index, parts without annotations, created with only id/object/status, and the
    message's output_item.done after the calls."""
    out = []
    late_message_done = None
    for payload in _copy(payloads):
        payload.pop("sequence_number", None)
        kind = payload["type"]
        if kind == "response.function_call_arguments.done":
            continue
        if kind in ("response.output_item.added", "response.output_item.done"):
            payload.pop("output_index", None)
        if kind.startswith("response.output_text."):
            payload.pop("logprobs", None)
            payload.pop("content_index", None)
        if isinstance(payload.get("part"), dict):
            payload["part"].pop("annotations", None)
        if kind == "response.created":
            payload["response"] = {k: payload["response"][k] for k in ("id", "object", "status")}
        if kind == "response.output_item.done" and payload["item"]["type"] == "message":
            late_message_done = payload
            continue
        if kind == "response.completed" and late_message_done is not None:
            out.append(late_message_done)
        out.append(payload)
    return out


def cut_reported_as_completed(payloads: Payloads) -> Payloads:
    """llama.cpp: a call cut by the token limit, its arguments unparsable, reported completed."""
    out = _copy(payloads)
    last_call = max(
        n for n, p in enumerate(out) if p["type"] == "response.function_call_arguments.delta"
    )
    item_id = out[last_call]["item_id"]
    out[last_call]["delta"] = out[last_call]["delta"][:-2]
    for payload in out:
        item = payload.get("item")
        if isinstance(item, dict) and item.get("id") == item_id:
            item["arguments"] = item["arguments"][:-2] if item["arguments"] else ""
        if (
            payload["type"] == "response.function_call_arguments.done"
            and payload["item_id"] == item_id
        ):
            payload["arguments"] = payload["arguments"][:-2]
    for item in out[-1]["response"]["output"]:
        if item["id"] == item_id:
            item["arguments"] = item["arguments"][:-2]
    return out


VARIANT = Callable[[Payloads], Payloads]
