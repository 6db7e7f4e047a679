"""Real client libraries, each driven over a list of cases, reporting what it reconstructed.

A driver runs every case it covers against one base URL (the replayer, or the proxy) and returns
an Outcome per case: the calls as the client hands them to its user, the text, the finish
reason, the error it raised and any further problem the client signalled (a missing done event,
a call marked invalid). It judges nothing; verdicts.py does.

Python clients run in this process; Node clients run as one `node drive.mjs` per (client,
target) over all cases, started together so they overlap with the Python drivers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
from langchain_core.messages import AIMessage, BaseMessage
from langchain_openai import ChatOpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState

from tests.clients import python_clients
from tests.clients.cases import PROMPT, Case
from tests.clients.llamaindex import env as llamaindex_env

HERE = Path(__file__).parent
NODE_SCRIPT = HERE / "drive.mjs"
NODE_MODULES = HERE / "node_modules"
TIMEOUT = 20.0


@dataclass(frozen=True)
class Call:
    id: str | None
    name: str | None
    # What the client hands its user as the arguments: the JSON text, or the object a client
    # already parsed (LangChain, the AI SDK).
    arguments: Any
    # Why the client refused the call (the AI SDK's invalid calls, LangChain's invalid_tool_calls).
    invalid: str | None = None


@dataclass(frozen=True)
class Outcome:
    calls: tuple[Call, ...] = ()
    content: str = ""
    finish_reason: str | None = None
    error: str | None = None
    problems: tuple[str, ...] = field(default=())

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(
            # A hole in a client's list of calls (openai-node leaves one for a skipped index)
            # comes as null.
            calls=tuple(
                Call(c["id"], c["name"], c["arguments"], c.get("invalid"))
                if c is not None
                else Call(None, None, None, "a hole in the client's list of calls")
                for c in data["calls"]
            ),
            content=data["content"] or "",
            finish_reason=data["finish_reason"],
            error=data["error"],
            problems=tuple(data["problems"]),
        )


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:400]


# -- openai-python ---------------------------------------------------------------------------


def _from_choice(choice: Any, error: str | None = None, problems: Sequence[str] = ()) -> Outcome:
    message = choice.message
    calls = message.tool_calls or []
    problems = [
        *problems,
        *(f"call {i}: type is {c.type!r}" for i, c in enumerate(calls) if c.type != "function"),
    ]
    problems += [
        f"call {i}: function.arguments is a {type(c.function.arguments).__name__}, not a str"
        for i, c in enumerate(calls)
        if not isinstance(c.function.arguments, str)
    ]
    return Outcome(
        calls=tuple(Call(c.id, c.function.name, c.function.arguments) for c in calls),
        content=message.content or "",
        finish_reason=choice.finish_reason,
        error=error,
        problems=tuple(problems),
    )


def _snapshot_choice(holder: Any) -> Any:
    """The accumulator's snapshot after a failure, or None when it holds nothing."""
    try:
        return holder.current_completion_snapshot.choices[0]
    except Exception:
        return None


def _after_stream(holder: Any, done_events: int) -> Outcome:
    try:
        completion = holder.get_final_completion()
    except openai.LengthFinishReasonError as exc:
        # The helpers report finish_reason "length" by raising, with the completion attached:
        # their way to hand over a cut response, not a failure to accumulate it.
        return _from_choice(exc.completion.choices[0])
    calls = sum(len(choice.message.tool_calls or []) for choice in completion.choices)
    problems = []
    if done_events != calls:
        problems.append(
            f"{done_events} tool_calls.function.arguments.done events for {calls} calls"
        )
    return _from_choice(completion.choices[0], problems=problems)


def _after_failure(holder: Any, exc: Exception) -> Outcome:
    choice = _snapshot_choice(holder)
    if choice is None:
        return Outcome(error=describe(exc))
    return _from_choice(choice, error=describe(exc))


def _openai_client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0, timeout=TIMEOUT
    )


def _is_done_event(event: Any) -> bool:
    return bool(event.type == "tool_calls.function.arguments.done")


def py_stream(client: openai.OpenAI, case: Case, model: str) -> Outcome:
    """`client.chat.completions.stream()`, the SDK's own streaming helper."""
    request = case.request(model)
    del request["stream"]
    manager = client.chat.completions.stream(**request)
    done_events = 0
    stream = None
    try:
        with manager as stream:
            for event in stream:
                done_events += _is_done_event(event)
            return _after_stream(stream, done_events)
    except Exception as exc:
        return Outcome(error=describe(exc)) if stream is None else _after_failure(stream, exc)


def py_state(client: openai.OpenAI, case: Case, model: str) -> Outcome:
    """Plain `create()`; for a stream, each chunk fed into `ChatCompletionStreamState`."""
    if not case.stream:
        completion = client.chat.completions.create(**case.request(model))
        return _from_choice(completion.choices[0])
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    done_events = 0
    try:
        for chunk in client.chat.completions.create(**case.request(model)):
            done_events += sum(_is_done_event(e) for e in state.handle_chunk(chunk))
        return _after_stream(state, done_events)
    except Exception as exc:
        return _after_failure(state, exc)


# -- langchain-openai --------------------------------------------------------------------------


def langchain(base_url: str, case: Case, model: str) -> Outcome:
    """`ChatOpenAI(...).bind_tools(tools).stream(...)` with the chunks summed (or `invoke`)."""
    llm = ChatOpenAI(
        model=model,
        base_url=f"{base_url}/v1",
        api_key="sk-test",
        max_retries=0,
        timeout=TIMEOUT,
    )
    runnable = llm.bind_tools(list(case.tools), tool_choice=case.tool_choice) if case.tools else llm
    messages = [("user", PROMPT)]
    message: BaseMessage | None = None
    try:
        if case.stream:
            for chunk in runnable.stream(messages):
                # AIMessageChunks, whose sum is one; the stubs name the items AIMessage, and
                # AIMessage + AIMessage a prompt template
                message = chunk if message is None else message + chunk  # type: ignore[assignment]
        else:
            message = runnable.invoke(messages)
    except Exception as exc:
        return _from_langchain(message, error=describe(exc))
    return _from_langchain(message)


def _from_langchain(message: BaseMessage | None, error: str | None = None) -> Outcome:
    if not isinstance(message, AIMessage):
        return Outcome(error=error or f"no AI message, got {message!r}")
    calls = [Call(c["id"], c["name"], c["args"]) for c in message.tool_calls]
    calls += [
        Call(c["id"], c["name"], c["args"], invalid=c["error"] or "invalid_tool_calls")
        for c in message.invalid_tool_calls
    ]
    return Outcome(
        calls=tuple(calls),
        content=message.content if isinstance(message.content, str) else str(message.content),
        finish_reason=message.response_metadata.get("finish_reason"),
        error=error,
    )


# -- the registry ------------------------------------------------------------------------------

Results = dict[str, Outcome]


@dataclass(frozen=True)
class Driver:
    name: str
    # Starts the run and returns a function that waits for its results (Node runs overlap).
    start: Callable[[Sequence[Case], str, Callable[[Case], str]], Callable[[], Results]]
    node: bool = False
    streams: bool = True  # covers stream: true cases
    non_streams: bool = True  # covers stream: false cases
    # Can ask for several choices (n > 1); LangChain and the AI SDK read one choice only.
    many_choices: bool = False
    # Runs against the replayer alone too; a client of the Responses or Messages API reaches a
    # chat case only through the proxy's translate mode.
    direct: bool = True

    def covers(self, case: Case) -> bool:
        if case.choices > 1 and not self.many_choices:
            return False
        return self.streams if case.stream else self.non_streams


def _in_process(
    run_one: Callable[[Any, Case, str], Outcome], make_client: Callable[[str], Any]
) -> Callable[[Sequence[Case], str, Callable[[Case], str]], Callable[[], Results]]:
    def start(
        cases: Sequence[Case], base_url: str, model_for: Callable[[Case], str]
    ) -> Callable[[], Results]:
        def finish() -> Results:
            client = make_client(base_url)
            results = {}
            for case in cases:
                # Warnings the client emits (a pydantic serializer warning about a dict where
                # a str belongs) are not what its user sees; the test suite's "warnings are
                # errors" must not turn them into exceptions the client never raises.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        results[case.name] = run_one(client, case, model_for(case))
                    except Exception as exc:
                        results[case.name] = Outcome(error=describe(exc))
            return results

        return finish

    return start


def node_missing_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed: the Node clients (openai-node, AI SDK) cannot run"
    return None


def _node(
    client: str,
) -> Callable[[Sequence[Case], str, Callable[[Case], str]], Callable[[], Results]]:
    def start(
        cases: Sequence[Case], base_url: str, model_for: Callable[[Case], str]
    ) -> Callable[[], Results]:
        if not NODE_MODULES.is_dir():
            raise RuntimeError(f"run `npm ci` in {HERE} first: {NODE_MODULES} is missing")
        jobs = [
            {
                "case": case.name,
                "model": model_for(case),
                "stream": case.stream,
                "prompt": PROMPT,
                "tools": list(case.tools),
                "tool_choice": case.tool_choice,
                "n": case.choices,
            }
            for case in cases
        ]
        process = subprocess.Popen(
            ["node", str(NODE_SCRIPT)],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        payload = json.dumps({"client": client, "baseURL": base_url, "jobs": jobs}).encode()

        def finish() -> Results:
            out, err = process.communicate(payload, timeout=TIMEOUT * (len(jobs) + 1))
            if process.returncode != 0:
                raise RuntimeError(f"node {client} exited {process.returncode}: {err.decode()}")
            return {name: Outcome.from_json(data) for name, data in json.loads(out).items()}

        return finish

    return start


def _subprocess(
    command: Callable[[], list[str]],
) -> Callable[[Sequence[Case], str, Callable[[Case], str]], Callable[[], Results]]:
    """A driver in a Python of its own (llama-index's venv): the jobs as JSON on stdin, one
    process per target over all cases, started at once like the Node drivers."""

    def start(
        cases: Sequence[Case], base_url: str, model_for: Callable[[Case], str]
    ) -> Callable[[], Results]:
        jobs = [
            {
                "case": case.name,
                "model": model_for(case),
                "stream": case.stream,
                "prompt": PROMPT,
                "tools": list(case.tools),
                "tool_choice": case.tool_choice,
            }
            for case in cases
        ]
        argv = command()
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        payload = json.dumps({"baseURL": base_url, "jobs": jobs}).encode()

        def finish() -> Results:
            out, err = process.communicate(payload, timeout=TIMEOUT * (len(jobs) + 1))
            if process.returncode != 0:
                raise RuntimeError(f"{argv[-1]} exited {process.returncode}: {err.decode()}")
            return {name: Outcome.from_json(data) for name, data in json.loads(out).items()}

        return finish

    return start


def _llamaindex_command() -> list[str]:
    if not llamaindex_env.ready():
        raise RuntimeError(
            f"llama-index's venv {llamaindex_env.venv_dir()} is missing: run "
            "`python -m tests.clients.llamaindex.env` (.ci/check does)"
        )
    return [str(llamaindex_env.python()), str(HERE / "llamaindex" / "driver.py")]


DRIVERS: tuple[Driver, ...] = (
    Driver(
        "py-stream", _in_process(py_stream, _openai_client), non_streams=False, many_choices=True
    ),
    Driver("py-state", _in_process(py_state, _openai_client), many_choices=True),
    Driver("langchain", _in_process(langchain, str)),
    Driver("node-openai", _node("node-openai"), node=True, many_choices=True),
    Driver("ai-sdk", _node("ai-sdk"), node=True),
    Driver("ai-sdk-legacy", _node("ai-sdk-legacy"), node=True),
    # issue 24: pydantic-ai's three models, LiteLLM's two prefixes, llama-index's OpenAILike
    Driver("pydantic-chat", python_clients.pydantic_ai("chat")),
    Driver("pydantic-responses", python_clients.pydantic_ai("responses"), direct=False),
    Driver("pydantic-anthropic", python_clients.pydantic_ai("anthropic"), direct=False),
    Driver("litellm-openai", _in_process(python_clients.litellm_sdk("openai"), str)),
    Driver(
        "litellm-anthropic", _in_process(python_clients.litellm_sdk("anthropic"), str), direct=False
    ),
    Driver("llamaindex", _subprocess(_llamaindex_command)),
)
DRIVER_NAMES = frozenset(d.name for d in DRIVERS)
