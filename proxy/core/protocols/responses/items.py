"""The output items of a Response, each with the events that stream it (docs/quirks.md R1-R10).

An item collects its text as it arrives and writes its events when the encoder lets it: its
``output_item.added`` and the deltas held so far (``flush``), then the ``.done`` events
(``finish``). ``full()`` is the item as ``response.output`` and ``output_item.done`` show it.
Events are payload dicts without ``sequence_number``; wire.py numbers and frames them.

The text is kept once: its pieces joined run by run as they come (a piece is an object of
its own, so a long text of short deltas would cost several times its size), and in the
events that repeat it (the ``.done`` events, ``output_item.done``, ``response.completed``) a
long text stands as the item's mark (``shared``), for which wire.py puts the one JSON
encoding of the text (``text_json``) between the event's other bytes.

* message: ``content_part.added`` / ``output_text.delta`` (``logprobs: []``) /
  ``output_text.done`` / ``content_part.done``, one ``output_text`` part at content_index 0;
* reasoning (chat's ``reasoning_content``): one summary part, ``reasoning_summary_*`` events;
* function_call: ``call_id`` and ``name`` final in ``output_item.added``, ``arguments: ""``,
  then ``function_call_arguments.delta`` / ``.done``;
* custom_tool_call: the chat call's ``{"input": ...}`` arguments become the item's ``input``;
  the input is only known once the arguments are whole, so it goes out as one delta at the end.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from proxy.core.jsonvalues import INVALID, JSONObject, loads

Payload = JSONObject
_MARK = "\x00mark\x00"  # stands for a delta's text in the template; orjson escapes it
_RUN = 256  # pieces of text joined into one as they come
SHARE_MIN = 1 << 16  # a text at least this long is shared by the events that repeat it


class Item:
    kind: ClassVar[str]
    text_kind: ClassVar[bool] = False  # message and reasoning: open until a later item starts

    def __init__(self, item_id: str, output_index: int, mark: str = _MARK) -> None:
        self.id = item_id
        self.output_index = output_index
        # every piece of text: each run of _RUN pieces joined into one as they come (the
        # first ``_runs``), the whole joined when it is asked for
        self.parts: list[str] = []
        self._runs = 0
        self._mark = mark  # stands for the text in the events that repeat it (``shared``)
        self._json: bytes | None = None
        self._unsent: list[str] = []  # the pieces not yet out as deltas
        self._added = False
        self._template: tuple[bytes, bytes] | None = None
        self.closed = False  # no more text will come
        self.complete = True  # False: cut off (a token limit, an error)
        self.status = "in_progress"

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
            self._runs = 1
        return self.parts[0] if self.parts else ""

    def shared(self) -> str:
        """The text as the events that repeat it carry it: a long one as the item's mark, its
        JSON encoding (``text_json``) written once for all of them."""
        text = self.text
        return self._mark if len(text) >= SHARE_MIN else text

    def text_json(self) -> bytes:
        """The text as a JSON string, encoded once."""
        if self._json is None:
            self._json = orjson.dumps(self.text)
        return self._json

    def add(self, text: str) -> None:
        self._keep(text)
        if self.streams_deltas:
            self._unsent.append(text)

    def _keep(self, text: str) -> None:
        parts = self.parts
        parts.append(text)
        if len(parts) - self._runs >= _RUN:
            parts[self._runs :] = ["".join(parts[self._runs :])]
            self._runs += 1

    def flush(self) -> list[Payload]:
        """``output_item.added`` (the first time) and a delta of the text that arrived since."""
        out: list[Payload] = []
        if not self._added:
            self._added = True
            out.append(self._event("response.output_item.added", item=self.opening()))
            out += self.opened()
        if self._unsent:
            out.append(self.delta("".join(self._unsent)))
            self._unsent.clear()
        return out

    def stream(self, text: str, sequence_number: int) -> bytes:
        """The delta event of ``text`` for an item whose added went out and holds nothing
        back (the hot path): the bytes ``flush`` and wire.py would write, from a template
        made once per item instead of a dict and a dump per token."""
        parts = self.parts
        parts.append(text)
        if len(parts) - self._runs >= _RUN:
            parts[self._runs :] = ["".join(parts[self._runs :])]
            self._runs += 1
        template = self._template
        if template is None:
            payload = self.delta(_MARK)
            data = orjson.dumps(payload)
            head, _, tail = data.partition(orjson.dumps(_MARK))
            event = b"event: " + str(payload["type"]).encode() + b"\ndata: "
            template = self._template = (event + head, tail[:-1] + b',"sequence_number":')
        head, tail = template
        return b"".join((head, orjson.dumps(text), tail, str(sequence_number).encode(), b"}\n\n"))

    @property
    def hot(self) -> bool:
        """Whether ``stream`` may take the next delta: added, nothing held, deltas streamed."""
        return self._added and not self._unsent and self.streams_deltas

    def finish(self, status: str) -> list[Payload]:
        self.status = status
        done = self._event("response.output_item.done", item=self.full(shared=True))
        return [*self.closing(), done]

    streams_deltas: ClassVar[bool] = True

    def _event(self, kind: str, **fields: Any) -> Payload:
        return {"type": kind, **fields, "output_index": self.output_index}

    def _item_event(self, kind: str, **fields: Any) -> Payload:
        return {"type": kind, "item_id": self.id, "output_index": self.output_index, **fields}

    # what each kind of item defines
    def opening(self) -> JSONObject:
        raise NotImplementedError

    def opened(self) -> list[Payload]:
        return []

    def delta(self, text: str) -> Payload:
        raise NotImplementedError

    def closing(self) -> list[Payload]:
        raise NotImplementedError

    def full(self, *, shared: bool = False) -> JSONObject:
        """The item whole; ``shared``: its text as ``shared()`` gives it."""
        raise NotImplementedError


class MessageItem(Item):
    kind = "message"
    text_kind = True

    def opening(self) -> JSONObject:
        return {
            "id": self.id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }

    def opened(self) -> list[Payload]:
        return [
            self._item_event("response.content_part.added", content_index=0, part=self._part(""))
        ]

    def delta(self, text: str) -> Payload:
        return self._item_event(
            "response.output_text.delta", content_index=0, delta=text, logprobs=[]
        )

    def closing(self) -> list[Payload]:
        text = self.shared()
        return [
            self._item_event("response.output_text.done", content_index=0, text=text, logprobs=[]),
            self._item_event("response.content_part.done", content_index=0, part=self._part(text)),
        ]

    def full(self, *, shared: bool = False) -> JSONObject:
        return {
            "id": self.id,
            "type": "message",
            "status": self.status,
            "content": [self._part(self.shared() if shared else self.text)],
            "role": "assistant",
        }

    @staticmethod
    def _part(text: str) -> JSONObject:
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


class ReasoningItem(Item):
    kind = "reasoning"
    text_kind = True

    def opening(self) -> JSONObject:
        return {"id": self.id, "type": "reasoning", "summary": []}

    def opened(self) -> list[Payload]:
        return [
            self._item_event(
                "response.reasoning_summary_part.added", summary_index=0, part=self._part("")
            )
        ]

    def delta(self, text: str) -> Payload:
        return self._item_event(
            "response.reasoning_summary_text.delta", summary_index=0, delta=text
        )

    def closing(self) -> list[Payload]:
        text = self.shared()
        return [
            self._item_event("response.reasoning_summary_text.done", summary_index=0, text=text),
            self._item_event(
                "response.reasoning_summary_part.done", summary_index=0, part=self._part(text)
            ),
        ]

    def full(self, *, shared: bool = False) -> JSONObject:
        text = self.shared() if shared else self.text
        return {"id": self.id, "type": "reasoning", "summary": [self._part(text)]}

    @staticmethod
    def _part(text: str) -> JSONObject:
        return {"type": "summary_text", "text": text}


class FunctionCallItem(Item):
    kind = "function_call"

    def __init__(
        self,
        item_id: str,
        output_index: int,
        call_id: str,
        name: str,
        namespace: str | None,
        mark: str = _MARK,
    ) -> None:
        super().__init__(item_id, output_index, mark)
        self.call_id = call_id
        self.name = name
        self.namespace = namespace

    def opening(self) -> JSONObject:
        return self._fields("in_progress", "")

    def delta(self, text: str) -> Payload:
        return self._item_event("response.function_call_arguments.delta", delta=text)

    def closing(self) -> list[Payload]:
        arguments = self.shared()
        return [self._item_event("response.function_call_arguments.done", arguments=arguments)]

    def full(self, *, shared: bool = False) -> JSONObject:
        return self._fields(self.status, self.shared() if shared else self.text)

    def _fields(self, status: str, arguments: str) -> JSONObject:
        item = {
            "id": self.id,
            "type": "function_call",
            "status": status,
            "arguments": arguments,
            "call_id": self.call_id,
            "name": self.name,
        }
        if self.namespace is not None:
            item["namespace"] = self.namespace
        return item

    def whole_json(self) -> bool:
        return loads(self.text) is not INVALID


class CustomToolCallItem(FunctionCallItem):
    kind = "custom_tool_call"
    streams_deltas = False  # the input is inside the arguments' JSON string: known at the end

    def opening(self) -> JSONObject:
        return self._custom("in_progress", "")

    def closing(self) -> list[Payload]:
        value = self.input
        delta = (
            [self._item_event("response.custom_tool_call_input.delta", delta=value)]
            if value
            else []
        )
        return [*delta, self._item_event("response.custom_tool_call_input.done", input=value)]

    def full(self, *, shared: bool = False) -> JSONObject:
        return self._custom(self.status, self.input)

    @property
    def input(self) -> str:
        """The one string the call's arguments carry (``{"input": "..."}``); arguments of any
        other shape are given as they came, so nothing the model wrote is lost."""
        value = loads(self.text)
        if isinstance(value, dict):
            strings = [v for v in value.values() if isinstance(v, str)]
            if isinstance(value.get("input"), str):
                return str(value["input"])
            if len(value) == 1 and len(strings) == 1:
                return strings[0]
        return self.text

    def _custom(self, status: str, value: str) -> JSONObject:
        return {
            "id": self.id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": self.call_id,
            "name": self.name,
            "input": value,
        }
