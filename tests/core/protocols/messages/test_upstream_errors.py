"""Issue 24 item 7 on native Messages: llama-server b11434 sends ``event: error`` over
``{"code": 500, "message": ..., "type": "server_error"}``, not Anthropic's shape, and the proxy
used to add ``content_block_stop``, a ``message_delta`` with ``end_turn`` and ``message_stop``
after it: a client that did not stop at the error saw a clean finish. The client gets
``{"type": "error", "error": {"type": "api_error", "message": ...}}`` and nothing after it
(``error-reshaped``)."""

from __future__ import annotations

from pathlib import Path

from proxy.core.repairs import Repair
from tests.core.protocols.messages.checker import check, events_of
from tests.core.protocols.messages.native_helpers import every_cut, repair
from tests.core.protocols.messages.streams import recorded

FIELD = Path(__file__).parents[3] / "fixtures" / "field"
B11434 = (FIELD / "llamacpp-b11434-error.messages.sse").read_bytes()
MESSAGE = "The model produced output that does not match the expected peg-native format"


def test_llama_servers_error_is_anthropics_and_the_last_word() -> None:
    for pieces in every_cut(B11434, "b11434"):
        out, repairs = repair(pieces, {"model": "m"})
        result = check(out)  # the strict checker: the error ends the stream, nothing follows
        assert result.error == {"type": "api_error", "message": MESSAGE}
        assert result.text == "Hello! I"
        assert [e["type"] for e in result.events][-1] == "error"
        assert not result.finished
        assert b"message_stop" not in out
        assert b"message_delta" not in out
        assert repairs[Repair.ERROR_RESHAPED] == 1
        assert Repair.MESSAGE_STOP_MISSING not in repairs


def test_a_bare_chat_shaped_error_is_anthropics_too() -> None:
    head = B11434[: B11434.index(b"event: error")]
    body = head + b'data: {"error":{"code":500,"message":"boom","type":"server_error"}}\n\n'
    out, repairs = repair(body, {"model": "m"})
    result = check(out)
    assert result.error == {"type": "api_error", "message": "boom"}
    assert repairs[Repair.ERROR_RESHAPED] == 1


def test_a_known_error_type_is_kept() -> None:
    head = B11434[: B11434.index(b"event: error")]
    body = head + b'event: error\ndata: {"message":"slow down","type":"overloaded_error"}\n\n'
    out, _ = repair(body, {"model": "m"})
    assert check(out).error == {"type": "overloaded_error", "message": "slow down"}


def test_anthropics_own_error_passes_byte_for_byte_and_counts_nothing() -> None:
    body = recorded("anthropic-sonnet45-text-only")
    cut = body[: body.index(b"event: content_block_stop")]
    error = (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n'
    )
    out, repairs = repair(cut + error, {"model": "m"})
    assert out == cut + error
    assert Repair.ERROR_RESHAPED not in repairs
    assert [e.event for e in events_of(out)][-1] == "error"
