"""The client suite's request shapes, sent by the real SDKs (openai, anthropic) so that the
corpus holds their bodies byte for byte as the SDKs write them: parallel calls and their
results, a multi-turn conversation, an image, a pydantic tool with an Optional field (an
``anyOf`` of primitive types). Each function sends one request to ``base_url``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

import anthropic
import openai
from pydantic import BaseModel

# a 1x1 PNG
PNG: Final = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


class Weather(BaseModel):
    """Get the weather in a city."""

    city: str
    unit: str | None = None


WEATHER: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "unit": {"type": "string", "description": "celsius or fahrenheit."},
            },
            "required": ["city"],
        },
    },
}
TIME: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the time in a timezone.",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "description": "The timezone."}},
            "required": ["timezone"],
        },
    },
}


def _openai(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0)


def chat_parallel(base_url: str) -> None:
    """A turn of two parallel calls and their two results, as the openai SDK sends them."""
    stream: Any = _openai(base_url).chat.completions.create(
        model="m",
        stream=True,
        tools=cast(Any, [WEATHER, TIME]),
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Weather in Paris and the time in CET?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_weather_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_time_2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": '{"timezone": "CET"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_weather_1", "content": "18 C, cloudy"},
            {"role": "tool", "tool_call_id": "call_time_2", "content": "14:05"},
        ],
    )
    stream.close()


def chat_multi_turn(base_url: str) -> None:
    """A developer message, then user and assistant turns, the last user turn in parts, and a
    pydantic tool (its Optional field is an anyOf of string and null)."""
    stream: Any = _openai(base_url).chat.completions.create(
        model="m",
        stream=True,
        tools=[openai.pydantic_function_tool(Weather, name="get_weather")],
        messages=[
            {"role": "developer", "content": "Answer briefly."},
            {"role": "user", "content": "Hello!"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "What is the weather in Tokyo?"}],
            },
        ],
    )
    stream.close()


def chat_image(base_url: str) -> None:
    stream: Any = _openai(base_url).chat.completions.create(
        model="m",
        stream=True,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            }
        ],
    )
    stream.close()


def responses_parallel(base_url: str) -> None:
    """Instructions, a developer item, two parallel function calls and their outputs."""
    stream: Any = _openai(base_url).responses.create(
        model="m",
        stream=True,
        instructions="You are a helpful assistant.",
        tools=cast(
            Any,
            [
                {**WEATHER["function"], "type": "function", "strict": False},
                {**TIME["function"], "type": "function", "strict": False},
            ],
        ),
        input=[
            {"role": "developer", "content": "Use the tools."},
            {"role": "user", "content": "Weather in Paris and the time in CET?"},
            {
                "type": "function_call",
                "call_id": "call_weather_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_time_2",
                "name": "get_time",
                "arguments": '{"timezone": "CET"}',
            },
            {"type": "function_call_output", "call_id": "call_weather_1", "output": "18 C"},
            {"type": "function_call_output", "call_id": "call_time_2", "output": "14:05"},
        ],
    )
    stream.close()


def messages_parallel(base_url: str) -> None:
    """Two parallel tool_use blocks and their tool_result blocks, then a text turn."""
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)
    tools: list[Any] = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in (WEATHER, TIME)
    ]
    with client.messages.stream(
        model="m",
        max_tokens=64,
        system="You are a helpful assistant.",
        tools=tools,
        messages=[
            {"role": "user", "content": "Weather in Paris and the time in CET?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_01B",
                        "name": "get_time",
                        "input": {"timezone": "CET"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18 C"},
                    {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "14:05"},
                    {"type": "text", "text": "Thanks. And in Tokyo?"},
                ],
            },
        ],
    ) as stream:
        stream.until_done()


def messages_image(base_url: str) -> None:
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)
    client.messages.create(
        model="m",
        max_tokens=64,
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                    {"type": "text", "text": "What is in this picture?"},
                ],
            }
        ],
    )


#: corpus name -> (the client's path, the function that sends it)
SHAPES: Final[dict[str, tuple[str, Callable[[str], None]]]] = {
    "sdk-chat-parallel": ("/v1/chat/completions", chat_parallel),
    "sdk-chat-multi-turn": ("/v1/chat/completions", chat_multi_turn),
    "sdk-chat-image": ("/v1/chat/completions", chat_image),
    "sdk-responses-parallel": ("/v1/responses", responses_parallel),
    "sdk-messages-parallel": ("/v1/messages", messages_parallel),
    "sdk-messages-image": ("/v1/messages", messages_image),
}
