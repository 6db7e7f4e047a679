"""A strict checker of Responses API streams (docs/quirks.md, "Responses streams"), and what a client gets.

``check(body)`` enforces, and raises ``StreamViolation`` naming the first rule broken:

* every event is an SSE event whose ``event:`` line equals its payload's ``type``, with a
  ``sequence_number`` from 0 up by one; no ``[DONE]``;
* ``response.created`` first, ``response.in_progress`` second; one terminal event
  (``response.completed`` / ``.incomplete`` / ``.failed``) and it is the last, with a status
  to match, the created response's id, ``usage`` (input/output/total tokens) and, when
  incomplete, ``incomplete_details.reason``; no terminal when ``complete=False`` (the stream
  was cut, so the client must not see a finish);
* items: ``output_item.added`` at ``output_index`` equal to the number of items before it;
  items never interleave (every event between an item's added and done is that item's);
  ``item_id`` on each item event equals the item's id;
* a function_call's added already carries non-empty ``call_id`` and ``name`` and
  ``arguments: ""``; its deltas join to ``function_call_arguments.done``'s ``arguments``, which
  equals the done item's; a custom_tool_call the same with ``input``;
* a message's parts are added at dense ``content_index``; ``output_text.delta`` carries
  ``logprobs``; ``output_text.done`` and ``content_part.done`` hold the joined text; reasoning
  summary parts likewise;
* the terminal ``response.output`` is every done item, in order, in full.
* an ``error`` event (with its ``message``) comes between items, never inside one.

It returns a ``Checked``: the payloads, the done items, the terminal response (None when cut).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from proxy.core.sse import Event, SSEDecoder

TERMINAL = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_ITEM_KINDS = ("message", "reasoning", "function_call", "custom_tool_call")


class StreamViolation(AssertionError):
    pass


@dataclass
class Checked:
    events: list[dict[str, Any]]
    items: list[dict[str, Any]]
    response: dict[str, Any] | None
    #: the item a cut stream ended in, as far as it streamed (its deltas joined)
    open_item: dict[str, Any] | None = None

    @property
    def items_so_far(self) -> list[dict[str, Any]]:
        return self.items + ([self.open_item] if self.open_item is not None else [])

    @property
    def calls_so_far(self) -> list[dict[str, Any]]:
        kinds = ("function_call", "custom_tool_call")
        return [i for i in self.items_so_far if i["type"] in kinds]

    @property
    def text_so_far(self) -> str:
        return "".join(
            part["text"]
            for item in self.items_so_far
            if item["type"] == "message"
            for part in item["content"]
        )

    @property
    def calls(self) -> list[dict[str, Any]]:
        return [i for i in self.items if i["type"] in ("function_call", "custom_tool_call")]

    @property
    def text(self) -> str:
        return "".join(
            part["text"]
            for item in self.items
            if item["type"] == "message"
            for part in item["content"]
        )

    @property
    def reasoning(self) -> str:
        return "".join(
            part["text"]
            for item in self.items
            if item["type"] == "reasoning"
            for part in item.get("summary", [])
        )


@dataclass
class _Open:
    item: dict[str, Any]
    index: int
    deltas: list[str] = field(default_factory=list)
    done_text: str | None = None
    parts: int = 0
    parts_open: bool = False


def parse(body: bytes) -> list[tuple[Event, dict[str, Any]]]:
    decoder = SSEDecoder()
    out: list[tuple[Event, dict[str, Any]]] = []
    for item in [*decoder.feed(body), *decoder.close()]:
        if not isinstance(item, Event):
            raise StreamViolation(f"bytes outside any event: {item.raw[:80]!r}")
        if item.data is None:
            continue
        if item.data == b"[DONE]":
            raise StreamViolation("a Responses stream has no [DONE]")
        payload = json.loads(item.data)
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            raise StreamViolation(f"an event without a type: {item.data[:80]!r}")
        out.append((item, payload))
    return out


def check(body: bytes, *, complete: bool = True) -> Checked:
    events = parse(body)
    payloads = [p for _, p in events]
    _check_framing(events)
    if not payloads or payloads[0]["type"] != "response.created":
        raise StreamViolation("the first event must be response.created")
    if len(payloads) < 2 or payloads[1]["type"] != "response.in_progress":
        raise StreamViolation("the second event must be response.in_progress")
    response_id = payloads[0]["response"]["id"]
    items: list[dict[str, Any]] = []
    current: _Open | None = None
    terminal: dict[str, Any] | None = None
    for n, payload in enumerate(payloads[2:], start=2):
        kind = payload["type"]
        if terminal is not None:
            raise StreamViolation(f"event {n} ({kind}) after the terminal event")
        if kind in TERMINAL:
            if current is not None:
                raise StreamViolation(f"{kind} while item {current.index} is still open")
            terminal = payload["response"]
            _check_terminal(kind, terminal, response_id, items)
        elif kind == "response.output_item.added":
            if current is not None:
                raise StreamViolation(f"item {len(items)} added while item {current.index} is open")
            current = _added(payload, len(items))
        elif kind == "response.output_item.done":
            if current is None:
                raise StreamViolation("output_item.done without an open item")
            items.append(_done(payload, current))
            current = None
        elif kind == "error":  # the spec's error event: between items, with its message
            if current is not None:
                raise StreamViolation(f"error while item {current.index} is still open")
            if not isinstance(payload.get("message"), str):
                raise StreamViolation("error without a message")
        else:
            if current is None:
                raise StreamViolation(f"{kind} outside any item")
            _item_event(payload, current)
    if complete and terminal is None:
        raise StreamViolation("the stream ended without a terminal event")
    if not complete and terminal is not None:
        raise StreamViolation("a cut stream must not end with a terminal event")
    return Checked(payloads, items, terminal, _so_far(current))


def _so_far(current: _Open | None) -> dict[str, Any] | None:
    if current is None:
        return None
    item = dict(current.item)
    text = "".join(current.deltas)
    if item["type"] == "function_call":
        item["arguments"] = text
    elif item["type"] == "custom_tool_call":
        item["input"] = text
    elif item["type"] == "message":
        item["content"] = [{"type": "output_text", "text": text}] if current.parts_open else []
    return item


def _check_framing(events: list[tuple[Event, dict[str, Any]]]) -> None:
    for n, (event, payload) in enumerate(events):
        if event.event != payload["type"]:
            raise StreamViolation(
                f"event {n}: event line {event.event!r} != type {payload['type']!r}"
            )
        if payload.get("sequence_number") != n:
            raise StreamViolation(f"event {n}: sequence_number {payload.get('sequence_number')!r}")


def _added(payload: dict[str, Any], index: int) -> _Open:
    item = payload.get("item")
    if payload.get("output_index") != index or not isinstance(item, dict):
        raise StreamViolation(
            f"output_item.added: output_index {payload.get('output_index')} != {index}"
        )
    if item.get("type") not in _ITEM_KINDS or not isinstance(item.get("id"), str) or not item["id"]:
        raise StreamViolation(f"output_item.added: bad item {item!r}")
    if item["type"] in ("function_call", "custom_tool_call"):
        for key in ("call_id", "name"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise StreamViolation(f"{item['type']} added without a final {key}: {item!r}")
        body_key = "arguments" if item["type"] == "function_call" else "input"
        if item.get(body_key) != "":
            raise StreamViolation(f"{item['type']} added with {body_key} {item.get(body_key)!r}")
    return _Open(item, index)


def _item_event(payload: dict[str, Any], current: _Open) -> None:
    kind, item = payload["type"], current.item
    if payload.get("output_index") != current.index:
        raise StreamViolation(
            f"{kind}: output_index {payload.get('output_index')} != {current.index}"
        )
    if payload.get("item_id") != item["id"]:
        raise StreamViolation(f"{kind}: item_id {payload.get('item_id')!r} != {item['id']!r}")
    expected = {
        "function_call": ("response.function_call_arguments.", "arguments"),
        "custom_tool_call": ("response.custom_tool_call_input.", "input"),
    }.get(item["type"])
    if expected is not None:
        prefix, key = expected
        if kind == prefix + "delta" and current.done_text is None:
            current.deltas.append(payload["delta"])
        elif kind == prefix + "done" and current.done_text is None:
            current.done_text = payload[key]
            if "".join(current.deltas) != current.done_text:
                raise StreamViolation(f"{kind}: {key} differ from the joined deltas")
        else:
            raise StreamViolation(f"{kind} in a {item['type']} item")
        return
    _part_event(kind, payload, current)


_PARTS = {
    "message": ("response.content_part.", "response.output_text.", "content_index"),
    "reasoning": (
        "response.reasoning_summary_part.",
        "response.reasoning_summary_text.",
        "summary_index",
    ),
}


def _part_event(kind: str, payload: dict[str, Any], current: _Open) -> None:
    part_prefix, text_prefix, index_key = _PARTS[current.item["type"]]
    index = payload.get(index_key)
    if kind == part_prefix + "added":
        if current.parts_open or index != current.parts:
            raise StreamViolation(f"{kind}: {index_key} {index} not dense (or a part still open)")
        current.parts_open, current.deltas, current.done_text = True, [], None
        return
    if not current.parts_open or index != current.parts:
        raise StreamViolation(f"{kind}: {index_key} {index} is not the open part {current.parts}")
    if kind == text_prefix + "delta" and current.done_text is None:
        if current.item["type"] == "message" and not isinstance(payload.get("logprobs"), list):
            raise StreamViolation(f"{kind} without logprobs")
        current.deltas.append(payload["delta"])
    elif kind == text_prefix + "done" and current.done_text is None:
        current.done_text = payload["text"]
        if "".join(current.deltas) != current.done_text:
            raise StreamViolation(f"{kind}: text differs from the joined deltas")
    elif kind == part_prefix + "done" and current.done_text is not None:
        if payload["part"].get("text") != current.done_text:
            raise StreamViolation(f"{kind}: the part's text differs from the joined deltas")
        current.parts_open = False
        current.parts += 1
    else:
        raise StreamViolation(f"{kind} out of order in a {current.item['type']} item")


def _done(payload: dict[str, Any], current: _Open) -> dict[str, Any]:
    item = payload.get("item")
    if payload.get("output_index") != current.index or not isinstance(item, dict):
        raise StreamViolation(f"output_item.done: output_index {payload.get('output_index')}")
    if item.get("id") != current.item["id"] or item.get("type") != current.item["type"]:
        raise StreamViolation("output_item.done: not the open item")
    if current.parts_open:
        raise StreamViolation("output_item.done while a part is open")
    if item["type"] in ("function_call", "custom_tool_call"):
        key = "arguments" if item["type"] == "function_call" else "input"
        if current.done_text is None or item.get(key) != current.done_text:
            raise StreamViolation(f"{item['type']} done without its .done event's {key}")
        if item.get("status") not in ("completed", "incomplete"):
            raise StreamViolation(f"{item['type']} done with status {item.get('status')!r}")
        for field_name in ("call_id", "name"):
            if item.get(field_name) != current.item[field_name]:
                raise StreamViolation(
                    f"{item['type']}: {field_name} changed between added and done"
                )
    elif item["type"] == "message":
        texts = [part.get("text") for part in item.get("content", [])]
        if len(texts) != current.parts:
            raise StreamViolation("message done: its content differs from the parts streamed")
    return item


def _comparable(item: dict[str, Any]) -> dict[str, Any]:
    """An item without the reasoning blob OpenAI encrypts afresh for the final response."""
    return {k: v for k, v in item.items() if k != "encrypted_content"}


def _check_terminal(
    kind: str, response: dict[str, Any], response_id: str, items: list[dict[str, Any]]
) -> None:
    if response.get("status") != TERMINAL[kind]:
        raise StreamViolation(f"{kind} with status {response.get('status')!r}")
    if response.get("id") != response_id:
        raise StreamViolation(f"{kind}: id {response.get('id')!r} != created {response_id!r}")
    if [_comparable(i) for i in response.get("output") or []] != [_comparable(i) for i in items]:
        raise StreamViolation(f"{kind}: output is not every done item in full")
    usage = response.get("usage")
    if kind != "response.failed" and not (
        isinstance(usage, dict)
        and all(
            isinstance(usage.get(k), int) for k in ("input_tokens", "output_tokens", "total_tokens")
        )
    ):
        raise StreamViolation(f"{kind} without usage: {usage!r}")
    if kind == "response.incomplete" and not (response.get("incomplete_details") or {}).get(
        "reason"
    ):
        raise StreamViolation("response.incomplete without incomplete_details.reason")
    if kind == "response.failed" and not (response.get("error") or {}).get("message"):
        raise StreamViolation("response.failed without error.message")
