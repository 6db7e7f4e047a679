"""Python client libraries beyond openai-python and LangChain (issue 24): pydantic-ai with its
three models (Chat Completions, Responses, Anthropic Messages) and the LiteLLM SDK with its
``openai/`` and ``anthropic/`` prefixes pointed at the proxy.

The Responses and Messages clients reach a chat case only through the proxy's translate mode
(the replayer speaks Chat Completions alone), so they have no direct run. Each driver returns
the calls, text and finish reason as its user gets them, the finish reason in chat's words
(pydantic-ai's ``tool_call`` is chat's ``tool_calls``; LiteLLM already speaks chat).
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from tests.clients.cases import PROMPT, Case

TIMEOUT = 20.0

# LiteLLM fetches its model price list from the network at import unless told not to, and
# counts a stream's tokens with a tokenizer from the Hugging Face hub (offline: tiktoken's,
# which it ships).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:400]


# -- pydantic-ai -------------------------------------------------------------------------------

# pydantic-ai's finish reasons, in chat's words
_PYDANTIC_FINISH = {"tool_call": "tool_calls", "stop": "stop", "length": "length"}


def _pydantic_tool_choice(choice: Any) -> Any:
    if choice in ("required", "none"):
        return choice
    if isinstance(choice, dict):
        return [choice["function"]["name"]]
    return None


async def _pydantic_request(model: Any, case: Case) -> tuple[Any, str | None]:
    """The response pydantic-ai builds, and the error it raised (the response so far, then)."""
    # imported here: the whole of pydantic-ai loads only when the driver runs
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition

    tools = [
        ToolDefinition(
            name=t["function"]["name"],
            description=t["function"].get("description"),
            parameters_json_schema=t["function"].get("parameters", {"type": "object"}),
        )
        for t in case.tools
    ]
    params = ModelRequestParameters(function_tools=tools, allow_text_output=True)
    settings = ModelSettings(timeout=TIMEOUT)
    if (choice := _pydantic_tool_choice(case.tool_choice)) is not None:
        settings["tool_choice"] = choice
    messages = [ModelRequest(parts=[UserPromptPart(PROMPT)])]
    if not case.stream:
        try:
            return await model.request(messages, settings, params), None
        except Exception as exc:
            return None, _describe(exc)
    stream = None
    try:
        async with model.request_stream(messages, settings, params) as stream:
            async for _ in stream:
                pass
            return stream.get(), None
    except Exception as exc:
        return (stream.get() if stream is not None else None), _describe(exc)


def _from_pydantic(response: Any, error: str | None, kind: str) -> Any:
    from pydantic_ai.messages import TextPart, ToolCallPart

    from tests.clients.drivers import Call, Outcome

    calls = tuple(
        Call(p.tool_call_id, p.tool_name, p.args)
        for p in response.parts
        if isinstance(p, ToolCallPart)
    )
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    finish = _PYDANTIC_FINISH.get(response.finish_reason, response.finish_reason)
    if finish == "stop" and calls and kind == "responses":
        # The Responses API has no finish reason for calls: a completed response that ends in
        # them is chat's tool_calls (pydantic-ai reports the status, "stop").
        finish = "tool_calls"
    return Outcome(calls=calls, content=text, finish_reason=finish, error=error)


def pydantic_ai(kind: str) -> Callable[[Sequence[Case], str, Callable[[Case], str]], Any]:
    """``OpenAIChatModel``, ``OpenAIResponsesModel`` or ``AnthropicModel`` over the cases, all
    in one event loop (a model and its HTTP client are made once a loop)."""

    def start(
        cases: Sequence[Case], base_url: str, model_for: Callable[[Case], str]
    ) -> Callable[[], dict[str, Any]]:
        async def run_all() -> dict[str, Any]:
            from tests.clients.drivers import Outcome

            results = {}
            provider = _pydantic_provider(kind, base_url)
            for case in cases:
                model = _pydantic_model(kind, provider, model_for(case))
                response, error = await _pydantic_request(model, case)
                results[case.name] = (
                    Outcome(error=error)
                    if response is None
                    else _from_pydantic(response, error, kind)
                )
            return results

        def finish() -> dict[str, Any]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return asyncio.run(run_all())

        return finish

    return start


def _pydantic_provider(kind: str, base_url: str) -> Any:
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.providers.openai import OpenAIProvider

    if kind == "anthropic":
        return AnthropicProvider(base_url=base_url, api_key="sk-test")
    return OpenAIProvider(base_url=f"{base_url}/v1", api_key="sk-test")


def _pydantic_model(kind: str, provider: Any, model_name: str) -> Any:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel

    if kind == "anthropic":
        return AnthropicModel(model_name, provider=provider)
    model_class = OpenAIChatModel if kind == "chat" else OpenAIResponsesModel
    return model_class(model_name, provider=provider)


# -- LiteLLM -----------------------------------------------------------------------------------


def litellm_sdk(prefix: str) -> Callable[[str, Case, str], Any]:
    """``litellm.completion(model="<prefix>/<model>", api_base=...)``; a stream's chunks are
    rebuilt with ``litellm.stream_chunk_builder``, as LiteLLM's documentation does."""

    def run_one(base_url: str, case: Case, model_name: str) -> Any:
        import litellm

        litellm.suppress_debug_info = True  # its banner on stdout at every raised error

        from tests.clients.drivers import Outcome

        messages = [{"role": "user", "content": PROMPT}]
        request: dict[str, Any] = {
            "model": f"{prefix}/{model_name}",
            "messages": messages,
            "api_key": "sk-test",
            "api_base": f"{base_url}/v1" if prefix == "openai" else base_url,
            "stream": case.stream,
            "timeout": TIMEOUT,
            "num_retries": 0,
        }
        if case.tools:
            request["tools"] = list(case.tools)
        if case.tool_choice is not None:
            request["tool_choice"] = case.tool_choice
        if prefix == "anthropic":
            request["max_tokens"] = 1024
        chunks: list[Any] = []
        try:
            if not case.stream:
                return _from_litellm(litellm.completion(**request))
            for chunk in litellm.completion(**request):
                chunks.append(chunk)
            built = litellm.stream_chunk_builder(chunks, messages=messages)
            if built is None:
                return Outcome(error="stream_chunk_builder returned nothing")
            return _from_litellm(built)
        except Exception as exc:
            partial = litellm.stream_chunk_builder(chunks, messages=messages) if chunks else None
            if partial is None:
                return Outcome(error=_describe(exc))
            return _from_litellm(partial, error=_describe(exc))

    return run_one


def _from_litellm(response: Any, error: str | None = None) -> Any:
    from tests.clients.drivers import Call, Outcome

    choice = response.choices[0]
    message = choice.message
    calls = tuple(
        Call(c.id, c.function.name, c.function.arguments) for c in (message.tool_calls or [])
    )
    return Outcome(
        calls=calls,
        content=message.content or "",
        finish_reason=choice.finish_reason,
        error=error,
    )
