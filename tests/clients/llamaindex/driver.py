"""Drives llama-index's ``OpenAILike`` over the client suite's cases and prints what it rebuilt.

Runs in llama-index's own virtual environment (env.py: it needs openai<3), so it imports
nothing of the project. stdin: {"baseURL": ..., "jobs": [{"case", "model", "stream", "prompt",
"tools", "tool_choice"}]}; stdout: {case: {"calls", "content", "finish_reason", "error",
"problems"}}, the shape tests/clients/drivers.py's Outcome.from_json reads.

A stream goes through ``stream_chat`` (chunks accumulated by llama-index's own
``update_tool_calls``), a body through ``chat``; the calls are what
``get_tool_calls_from_response`` hands an agent.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike

TIMEOUT = 20.0


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:400]


def run(base_url: str, job: dict[str, Any]) -> dict[str, Any]:
    llm = OpenAILike(
        model=job["model"],
        api_base=f"{base_url}/v1",
        api_key="sk-test",
        is_chat_model=True,
        is_function_calling_model=True,
        max_retries=0,
        timeout=TIMEOUT,
    )
    messages = [ChatMessage(role="user", content=job["prompt"])]
    kwargs: dict[str, Any] = {}
    if job["tools"]:
        kwargs["tools"] = job["tools"]
    if job["tool_choice"] is not None:
        kwargs["tool_choice"] = job["tool_choice"]
    response = None
    finish = None
    error = None
    try:
        if job["stream"]:
            for response in llm.stream_chat(messages, **kwargs):
                finish = _finish(response.raw) or finish
        else:
            response = llm.chat(messages, **kwargs)
            finish = _finish(response.raw)
    except Exception as exc:
        error = describe(exc)
    if response is None:
        return {"calls": [], "content": "", "finish_reason": None, "error": error, "problems": []}
    calls = [
        {"id": s.tool_id, "name": s.tool_name, "arguments": s.tool_kwargs}
        for s in llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
    ]
    return {
        "calls": calls,
        "content": response.message.content or "",
        "finish_reason": finish,
        "error": error,
        "problems": [],
    }


def _finish(raw: Any) -> str | None:
    choices = getattr(raw, "choices", None) or (
        raw.get("choices") if isinstance(raw, dict) else None
    )
    if not choices:
        return None
    choice = choices[0]
    value = getattr(choice, "finish_reason", None)
    if value is None and isinstance(choice, dict):
        value = choice.get("finish_reason")
    return value


def main() -> None:
    payload = json.load(sys.stdin)
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for job in payload["jobs"]:
            try:
                results[job["case"]] = run(payload["baseURL"], job)
            except Exception as exc:
                results[job["case"]] = {
                    "calls": [],
                    "content": "",
                    "finish_reason": None,
                    "error": describe(exc),
                    "problems": [],
                }
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
