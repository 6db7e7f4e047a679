"""The client's chunks, built from a choice's pieces in the envelope of the chunk they came from.

A rewritten chunk keeps the upstream's envelope (id, object, created, model,
system_fingerprint, unknown fields) and changes only what the repair needs. When one chunk
becomes several, its usage goes only on the last (clients may add usages up) and its
logprobs only on the first. A chunk that comes out equal to the upstream's goes out as the
upstream's bytes.
"""

from __future__ import annotations

from proxy.core.protocols.chat.chunks import JSONObject, dumps
from proxy.core.protocols.chat.pieces import Piece, Source
from proxy.core.sse import Event, encode_event


def render_own(source: Source, choices: list[JSONObject], own: list[list[Piece]]) -> list[bytes]:
    """The chunks a chunk sends itself: piece k of every choice in chunk k."""
    count = max(map(len, own))
    chunk = source.chunk
    if count == 0:
        if chunk.get("usage") is None:
            source.silent = True
            return []
        # everything was held, but the usage must still reach the client
        rest = [_choice_out(c, {} if isinstance(c.get("delta"), dict) else None) for c in choices]
        return [_encode(_chunk_out(chunk, rest, usage=True), source.event)]
    # plain loops: on every chunk of a call streamed out of markup, comprehensions cost
    out: list[bytes] = []
    for k in range(count):
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
    choice: JSONObject, delta: JSONObject | None, finish: object = None, *, first: bool = True
) -> JSONObject:
    # a key set again keeps its place; a new one goes last, the delta before the finish
    out = dict(choice)
    if delta is not None:
        out["delta"] = delta
    if finish is not None or "finish_reason" in out:
        out["finish_reason"] = finish
    if not first and "logprobs" in out:
        out["logprobs"] = None
    return out


def _chunk_out(chunk: JSONObject, choices: list[JSONObject], *, usage: bool) -> JSONObject:
    out = dict(chunk)
    if "choices" in out:
        out["choices"] = choices
    if not usage and out.get("usage") is not None:
        del out["usage"]
    return out
