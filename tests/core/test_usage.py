"""proxy/core/usage.py: the usage shapes read, and a stream's latest usage kept cheaply."""

from __future__ import annotations

import orjson

from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from proxy.core.usage import (
    READERS,
    Tokens,
    UsageSeen,
    body_tokens,
    chat_tokens,
    has_usage_object,
    messages_tokens,
    responses_tokens,
)


def test_every_registered_protocol_has_a_usage_reader() -> None:
    assert set(READERS) == set(CLIENT_PROTOCOLS)


def test_chat_usage_with_details() -> None:
    usage = {
        "prompt_tokens": 374,
        "completion_tokens": 61,
        "prompt_tokens_details": {"cached_tokens": 256},
        "completion_tokens_details": {"reasoning_tokens": 17},
    }
    assert chat_tokens(usage) == Tokens(374, 61, 17, 256)


def test_only_what_is_reported_counts() -> None:
    assert chat_tokens({"prompt_tokens": 3}) == Tokens(prompt=3)
    assert chat_tokens({"total_tokens": 3, "prompt_tokens": -1, "completion_tokens": True}) is None
    assert list(Tokens(prompt=3, cached=0).reported()) == [("prompt", 3), ("cached", 0)]


def test_responses_usage() -> None:
    usage = {
        "input_tokens": 134,
        "input_tokens_details": {"cached_tokens": 100},
        "output_tokens": 28,
        "output_tokens_details": {"reasoning_tokens": 20},
    }
    assert responses_tokens(usage) == Tokens(134, 28, 20, 100)


def test_messages_prompt_is_the_input_with_what_the_cache_read_and_wrote() -> None:
    usage = {
        "input_tokens": 30,
        "cache_read_input_tokens": 500,
        "cache_creation_input_tokens": 7,
        "output_tokens": 9,
    }
    assert messages_tokens(usage) == Tokens(prompt=537, completion=9, cached=500)
    assert messages_tokens({"output_tokens": 9}) == Tokens(completion=9)


def _event(chunk: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def test_a_read_of_events_passed_unparsed_gives_its_last_usage_object() -> None:
    seen = UsageSeen(chat_tokens)
    seen.saw({"prompt_tokens": 1, "completion_tokens": 1})
    read = b"".join(
        [
            _event({"usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
            _event({"usage": {"prompt_tokens": 5, "completion_tokens": 3}}),
            _event({"usage": None}),  # OpenAI's on every chunk: no figures, not kept
        ]
    )
    seen.passed_read(read)
    seen.passed(orjson.dumps({"usage": None}))
    assert seen.tokens() == Tokens(prompt=5, completion=3)


def test_a_later_parsed_usage_wins_over_an_earlier_passed_one() -> None:
    seen = UsageSeen(chat_tokens)
    seen.passed(orjson.dumps({"usage": {"completion_tokens": 2}}))
    seen.saw({"completion_tokens": 4})
    assert seen.tokens() == Tokens(completion=4)
    assert UsageSeen(chat_tokens).tokens() is None


def test_messages_figures_merge_the_later_winning() -> None:
    seen = UsageSeen(messages_tokens, merge=True)
    seen.saw({"input_tokens": 43, "output_tokens": 1})
    seen.saw({"input_tokens": 61, "output_tokens": 2})
    seen.saw({"output_tokens": 5})
    assert seen.tokens() == Tokens(prompt=61, completion=5)


def test_a_whole_body_is_read_only_when_it_holds_a_usage_object() -> None:
    assert body_tokens("chat", b'{"usage": null, "choices": []}') is None
    assert body_tokens("chat", b"not json") is None
    body = orjson.dumps({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1}})
    assert body_tokens("chat", body) == Tokens(prompt=2, completion=1)
    assert body_tokens("messages", b'{"usage": {"output_tokens": 4}}') == Tokens(completion=4)


def test_usage_objects_are_told_from_null_in_any_spacing() -> None:
    assert has_usage_object(b'{"usage":{"prompt_tokens":1}}')
    assert has_usage_object(b'{"usage" :\n {"prompt_tokens":1}}')
    assert not has_usage_object(b'{"usage":null}')
    assert not has_usage_object(b'{"usage" : null}')
    assert has_usage_object(b'{"usage":null,"x_groq":{"usage":{"prompt_tokens":1}}}')
    assert not has_usage_object(b'{"choices":[]}')
