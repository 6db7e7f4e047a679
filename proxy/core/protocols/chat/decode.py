"""Canonical Chat Completions chunks -> neutral events (proxy/core/events.py).

The decoder reads what the chat normalizer writes: chunks whose tool calls are already
canonical (an opening entry with index, id and name, then argument fragments; a finish
reason after the calls). So it only translates; it repairs nothing. One choice is read: a
translated request never asks for more than one (choices other than 0 are left out).

A call is closed when the stream's finish comes, not when the next call opens: chat allows
the arguments of two calls to interleave, and the events keep that order for the encoder to
settle. A call still open at a ``length`` finish was cut off (``CallClosed(complete=False)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Failed,
    Finished,
    FinishReason,
    ReasoningDelta,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from proxy.core.jsonvalues import INVALID, JSONObject, loads
from proxy.core.sse import Event, is_done

_REASONING_KEYS: Final = ("reasoning_content", "reasoning")
_FINISH: Final = {reason.value: reason for reason in FinishReason}


class ChatDecoder:
    """One canonical chat stream, chunk by chunk. ``feed_event`` takes decoded SSE events;
    ``feed_chunk`` a parsed chunk; both return the events it completes, in order."""

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._calls: dict[object, int] = {}  # the chunk's tool-call index -> the event index
        self._open: list[int] = []  # event indexes of calls not closed yet, in opening order

    def feed_event(self, event: Event) -> list[StreamEvent]:
        if event.data is None or is_done(event.data):
            return []
        value = loads(event.data)
        if not isinstance(value, dict):
            return []
        return self.feed_chunk(value)

    def feed_chunk(self, chunk: JSONObject) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if not self._envelope(chunk, out):
            return out
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self._choice(choice, out)
        self._usage(chunk, out)
        return out

    def _envelope(self, chunk: JSONObject, out: list[StreamEvent]) -> bool:
        """A chunk begins: ``Started`` if it is the first; whether its choices and usage are
        read (an ``error`` in it makes it a failure instead)."""
        if not self._started:
            self._started = True
            out.append(started_event(chunk))
        error = chunk.get("error")
        if error is not None:
            out.append(failed(error))
            return False
        return True

    def _usage(self, chunk: JSONObject, out: list[StreamEvent]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            out.append(usage_event(usage))

    def _choice(self, choice: JSONObject, out: list[StreamEvent]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self._delta(delta, out)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            out.extend(self._finish(reason, choice.get("stop_reason")))

    def _delta(self, delta: Mapping[str, object], out: list[StreamEvent]) -> None:
        seen = None
        for key in _REASONING_KEYS:
            text = delta.get(key)
            # a server that sends both fields sends the same text in each (vLLM between the
            # two names, some gateways): it is read once (issue 24 item 11)
            if isinstance(text, str) and text and text != seen:
                out.append(ReasoningDelta(text))
                seen = text
        text = delta.get("content")
        if isinstance(text, str) and text:
            out.append(TextDelta(text))
        calls = delta.get("tool_calls")
        for entry in calls if isinstance(calls, list) else ():
            if isinstance(entry, dict):
                self._call_entry(entry, out)

    def _call_entry(self, entry: JSONObject, out: list[StreamEvent]) -> None:
        fn = entry.get("function")
        fn = fn if isinstance(fn, dict) else {}
        self._call(entry.get("index", 0), entry.get("id"), fn.get("name"), fn.get("arguments"), out)

    def _call(
        self, key: object, ident: object, name: object, args: object, out: list[StreamEvent]
    ) -> None:
        """One tool-call entry: its call opened when its index is new, then its arguments."""
        index = self._calls.get(key)
        if index is None:
            index = self._calls[key] = len(self._calls)
            self._open.append(index)
            out.append(CallOpened(index, str(ident or ""), str(name or "")))
        if isinstance(args, str) and args:
            out.append(ArgumentsDelta(index, args))

    def _finish(self, reason: str, stop_reason: object) -> list[StreamEvent]:
        finish = _FINISH.get(reason, FinishReason.STOP)
        complete = finish is not FinishReason.LENGTH
        out: list[StreamEvent] = [CallClosed(index, complete) for index in self._open]
        self._open.clear()
        # vLLM names the stop sequence that ended the text in ``stop_reason`` (a token id
        # when it was a stop token, which is no sequence).
        stop = stop_reason if isinstance(stop_reason, str) and finish is FinishReason.STOP else None
        out.append(Finished(finish, stop))
        return out

    def close(self, *, complete: bool) -> list[StreamEvent]:
        if self._ended:
            return []
        self._ended = True
        out: list[StreamEvent] = [] if self._started else [Started()]
        out.append(Ended(complete))
        return out


def started_event(chunk: JSONObject) -> Started:
    ident, model, created = chunk.get("id"), chunk.get("model"), chunk.get("created")
    return Started(
        ident if isinstance(ident, str) else None,
        model if isinstance(model, str) else None,
        created if isinstance(created, int) and not isinstance(created, bool) else None,
    )


def _tokens(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_event(usage: JSONObject) -> Usage:
    return Usage(
        _tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens")), usage
    )


def failed(error: object) -> Failed:
    """An OpenAI-shaped (or llama.cpp-shaped) error object as a ``Failed`` event."""
    if not isinstance(error, dict):
        return Failed(str(error))
    message, kind, code = error.get("message"), error.get("type"), error.get("code")
    return Failed(
        message if isinstance(message, str) else "the upstream reported an error",
        kind if isinstance(kind, str) else None,
        str(code) if code is not None else None,
    )


def completion_events(body: bytes) -> list[StreamEvent] | None:
    """A whole (non-streamed) canonical chat completion as the events a stream of it would
    give; None when the body is not a chat completion."""
    value: Any = loads(body)
    if value is INVALID or not isinstance(value, dict):
        return None
    choices = value.get("choices")
    if not isinstance(choices, list):
        if "error" in value:
            return [Started(), failed(value["error"]), Ended(True)]
        return None
    decoder = ChatDecoder()
    chunk: JSONObject = {k: v for k, v in value.items() if k not in ("choices", "usage")}
    chunk["choices"] = [_as_delta(c) for c in choices if isinstance(c, dict)]
    if "usage" in value:
        chunk["usage"] = value["usage"]
    return decoder.feed_chunk(chunk) + decoder.close(complete=True)


def _as_delta(choice: JSONObject) -> JSONObject:
    """A completion's choice in a chunk's shape: its message as the delta, each tool call
    numbered by its position (a whole message's calls carry no index)."""
    message = choice.get("message")
    delta = dict(message) if isinstance(message, dict) else {}
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        delta["tool_calls"] = [
            {**call, "index": i} if isinstance(call, dict) else call for i, call in enumerate(calls)
        ]
    return {**choice, "delta": delta}
