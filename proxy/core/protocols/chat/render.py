"""The client's chunks, built from a choice's pieces in the envelope of the chunk they came from.

Only here do a piece's typed delta values (chat/deltas.py) become delta objects.
A rewritten chunk keeps the upstream's envelope (id, object, created, model,
system_fingerprint, unknown fields) and changes only what the repair needs. When one chunk
becomes several, its usage goes only on the last (clients may add usages up) and its
logprobs only on the first. A chunk that comes out equal to the upstream's goes out as the
upstream's bytes.
"""

from __future__ import annotations

from typing import cast

from proxy.core.jsonvalues import JSONObject, dumps
from proxy.core.protocols.chat.chunkshape import ChunkShape
from proxy.core.protocols.chat.deltas import (
    KEPT,
    NO_FIELDS,
    ArgsDelta,
    Delta,
    FieldsDelta,
    KeptDelta,
    OpeningDelta,
)
from proxy.core.protocols.chat.pieces import Piece, Source
from proxy.core.sse import Event, data_frame, encode_event


def render_own(source: Source, choices: list[JSONObject], own: list[list[Piece]]) -> list[bytes]:
    """The chunks a chunk sends itself: piece k of every choice in chunk k."""
    count = max(map(len, own))
    chunk = source.chunk
    if count == 0:
        if chunk.get("usage") is None:
            source.silent = True
            return []
        # everything was held, but the usage must still reach the client
        rest = [
            _choice_out(c, FieldsDelta(NO_FIELDS) if isinstance(c.get("delta"), dict) else KEPT)
            for c in choices
        ]
        return [_encode(_chunk_out(chunk, rest, usage=True), source.event)]
    # plain loops: on every chunk of a call streamed out of markup, comprehensions cost
    out: list[bytes] = []
    # one choice's argument pieces after the first (a call held in markup goes out whole,
    # issue 24 item 4): chunks the same but for the text, each the one before around its own
    runs = len(own) == 1 and chunk.get("usage") is None
    shape: ChunkShape | None = None
    for k in range(count):
        if runs and k:
            piece = own[0][k]
            if _continues(piece, own[0][k - 1]):
                delta = cast("ArgsDelta", piece.delta)
                if shape is not None:
                    out.append(shape.with_text(delta.text))
                    continue
                data = dumps(
                    _chunk_out(chunk, [_choice_out(piece.choice, delta, first=False)], usage=False)
                )
                # the next pieces' whole events, framing included, around their text
                shape = ChunkShape.around(data, b"arguments", delta.text)
                if shape is not None:
                    shape = shape.framed(*data_frame(source.event.event))
                out.append(encode_event(data, event=source.event.event))
                continue
            shape = None
        row: list[JSONObject] = []
        for pieces in own:
            if len(pieces) > k:
                piece = pieces[k]
                row.append(_choice_out(piece.choice, piece.delta, piece.finish, first=k == 0))
        rendered = _chunk_out(chunk, row, usage=k == count - 1)
        if count == 1 and rendered == chunk:
            return [source.event.raw]
        out.append(_encode(rendered, source.event))
    return out


def _continues(piece: Piece, before: Piece) -> bool:
    """Whether ``piece`` is an argument piece of the call ``before`` is one of, in the same
    choice, with nothing else in it: its chunk is ``before``'s around another text."""
    delta, last = piece.delta, before.delta
    return (
        type(delta) is ArgsDelta
        and type(last) is ArgsDelta
        and delta.index == last.index
        and delta.extras is None
        and last.extras is None
        and not delta.head
        and not last.head
        and piece.finish is None
        and before.finish is None
        and piece.choice is before.choice
    )


def render_released(piece: Piece) -> bytes:
    """A piece sent after its chunk: in that chunk's envelope, as its bytes if unchanged."""
    source = piece.source
    chunk = _chunk_out(
        source.chunk,
        [_choice_out(piece.choice, piece.delta, piece.finish, first=source.silent)],
        usage=False,
    )
    if source.silent and chunk == source.chunk:
        return source.event.raw
    return _encode(chunk, source.event)


def _encode(chunk: JSONObject, event: Event) -> bytes:
    return encode_event(dumps(chunk), event=event.event)


def _choice_out(
    choice: JSONObject, delta: Delta, finish: object = None, *, first: bool = True
) -> JSONObject:
    # a key set again keeps its place; a new one goes last, the delta before the finish
    out = dict(choice)
    if isinstance(delta, ArgsDelta):  # the most frequent, on every slow-path continuation
        out["delta"] = _args_object(delta)
    elif not isinstance(delta, KeptDelta):
        out["delta"] = delta_object(delta)
    if finish is not None or "finish_reason" in out:
        out["finish_reason"] = finish
    if not first and "logprobs" in out:
        out["logprobs"] = None
    return out


def delta_object(delta: FieldsDelta | OpeningDelta | ArgsDelta) -> object:
    """The delta object a client reads, its keys in the order clients have always seen:
    unknown fields after the known ones, the delta's other fields in front of ``tool_calls``."""
    if isinstance(delta, FieldsDelta):
        return delta.fields
    if isinstance(delta, ArgsDelta):
        return _args_object(delta)
    function: JSONObject = {} if delta.name is None else {"name": delta.name}
    function["arguments"] = delta.arguments
    entry: JSONObject = {
        "index": delta.index,
        "id": delta.id,
        "type": "function",
        "function": function,
    }
    if delta.extras is not None:
        function.update(delta.extras.function)
        entry.update(delta.extras.entry)
    return {**delta.head, "tool_calls": [entry]} if delta.head else {"tool_calls": [entry]}


def _args_object(delta: ArgsDelta) -> JSONObject:
    # built in one place with no call further: it is made for every slow-path continuation
    function: JSONObject = {"arguments": delta.text}
    entry: JSONObject = {"index": delta.index, "function": function}
    if delta.extras is not None:
        function.update(delta.extras.function)
        entry.update(delta.extras.entry)
    return {**delta.head, "tool_calls": [entry]} if delta.head else {"tool_calls": [entry]}


def _chunk_out(chunk: JSONObject, choices: list[JSONObject], *, usage: bool) -> JSONObject:
    out = dict(chunk)
    if "choices" in out:
        out["choices"] = choices
    if not usage and out.get("usage") is not None:
        del out["usage"]
    return out
