"""``reasoning_field`` (issue 24 item 11): the field a chat client gets reasoning in, whatever
field the upstream sent it in; "keep", the default, leaves the stream as it came."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.protocols.chat.normalize import StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from tests.support.normalizer import counting_ids, eventwise, run

FIELD = Path(__file__).parents[3] / "fixtures" / "field"
TOOLS = RequestInfo.from_body(
    {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
)
STREAMS = {
    "reasoning": FIELD / "vllm-reasoning-field.chat.sse",
    "both": FIELD / "vllm-reasoning-both-fields.chat.sse",
    "reasoning_content": FIELD.parent / "upstream" / "deepseek-api-canonical-with-reasoning.sse",
}


def _reasoning(out: bytes) -> dict[str, str]:
    """The reasoning text a client reads in each field."""
    found: dict[str, str] = {}
    for line in out.split(b"\n\n"):
        if not line.startswith(b"data: {"):
            continue
        for choice in json.loads(line[6:]).get("choices", ()):
            for key in ("reasoning_content", "reasoning"):
                text = choice.get("delta", {}).get(key)
                if isinstance(text, str) and text:
                    found[key] = found.get(key, "") + text
    return found


@pytest.mark.parametrize("stream", STREAMS)
def test_keep_leaves_every_stream_as_it_came(stream: str) -> None:
    body = STREAMS[stream].read_bytes()
    out, normalizer = run(body, options=UpstreamOptions(), request=TOOLS)
    assert _reasoning(out) == _reasoning(body)
    assert "reasoning-field-renamed" not in normalizer.repairs


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("fast", [True, False])
def test_the_reasoning_comes_in_the_field_named_once(stream: str, field: str, fast: bool) -> None:
    body = STREAMS[stream].read_bytes()
    text = next(iter(_reasoning(body).values()))
    normalizer = StreamNormalizer(
        UpstreamOptions(reasoning_field=field),  # type: ignore[arg-type]
        TOOLS,
        new_id=counting_ids(),
        fast=fast,
    )
    sse = ChatSSEStream(normalizer)
    out = b"".join([b for read in eventwise(body) for b in sse.feed(read)])
    out += b"".join(sse.close(complete=True))
    assert _reasoning(out) == {field: text}
    assert (normalizer.repairs["reasoning-field-renamed"] > 0) == (stream != field)
