"""The same repairs for a response that is not streamed (``stream: false``).

``choices[].message.tool_calls`` gets what the streaming normalizer gives each call: an
array (Q20, and N4's calls found beside the message), a top-level id (Q3) or a synthesized
one (Q7), ``type: "function"``, a name, arguments as a JSON string (Q19, N2) and ``"{}"`` for
a call without arguments; ``finish_reason`` is corrected (Q23, Q24), to ``length`` instead of
``tool_calls`` when a call was cut off (arguments that are not JSON, markup that never closed;
``args-truncated``, as in a stream). Markup in the text becomes calls when extraction is on
and the message has none (Q32). The original bytes come back when nothing changes or the body
is not a chat completion.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import orjson

from proxy.core import markup as dialects
from proxy.core.arguments.rules import call_rules
from proxy.core.arguments.tools import RequestTools
from proxy.core.calls.jsontext import complete_json
from proxy.core.errors import DialectError
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import INVALID, JSONObject, dumps, loads
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Extractor, Segment, Text
from proxy.core.protocols.chat.grammar_calls import grammar_call
from proxy.core.protocols.chat.reasoning import FIELDS
from proxy.core.protocols.chat.tooldelta import read_entry
from proxy.core.protocols.native_calls import unwrapped
from proxy.core.protocols.think import leading_think
from proxy.core.repairs import Repair, markup_kind

if TYPE_CHECKING:
    from proxy.core.options import RequestInfo, UpstreamOptions

_FINISH_MAP: Final = {"": "stop", "eos_token": "stop", "end_turn": "stop"}  # Q24


def normalize_completion(
    body: bytes,
    options: UpstreamOptions,
    request: RequestInfo,
    *,
    new_id: Callable[[], str],
) -> tuple[bytes, Counter[str]]:
    """The repaired body and what was repaired; ``body`` itself when nothing changed."""
    repairs: Counter[str] = Counter()
    obj = loads(body)
    if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
        return body, repairs
    fixer = _Fixer(options, request, IdPool(new_id, _ids(obj["choices"])), repairs)
    changed = False
    for choice in obj["choices"]:
        if isinstance(choice, dict) and fixer.choice(choice):
            changed = True
    if not changed:
        return body, repairs  # what was only seen, such as a dialect that failed
    try:
        return dumps(obj), repairs
    except orjson.JSONEncodeError:  # orjson reads deeper nesting than it writes: fail open
        return body, Counter()


class _Fixer:
    def __init__(
        self,
        options: UpstreamOptions,
        request: RequestInfo,
        ids: IdPool,
        repairs: Counter[str],
    ) -> None:
        self._options = options
        self._request = request
        self._ids = ids
        self._repairs = repairs
        self._rules = (
            call_rules(options, RequestTools.from_chat(request.tools)) if request.tools else None
        )
        self._one_call = request.one_call and options.enforce_parallel_tool_calls

    def choice(self, choice: JSONObject) -> bool:
        message = choice.get("message")
        if not isinstance(message, dict):
            return False
        changed = self._leading_think(message)
        if message.get("tool_calls") is None and choice.get("tool_calls") is not None:
            message["tool_calls"] = choice.pop("tool_calls")  # N4
            self._record(Repair.TOOL_CALLS_BESIDE_MESSAGE)
            changed = True
        calls = message.get("tool_calls")
        if isinstance(calls, dict):
            calls = message["tool_calls"] = [calls]
            self._record(Repair.TOOL_CALLS_NOT_AN_ARRAY)
            changed = True
        if isinstance(calls, list) and calls:
            fixed = [self._call(call) for call in calls]
            if all(call is not None for call in fixed) and fixed != calls:
                message["tool_calls"] = fixed
                changed = True
        elif self._extraction_on():
            changed = self._extract(message) or changed
        changed = self._arguments(choice, message) or changed
        return self._finish(choice, message) or changed

    # -- the calls' arguments (issue 25): their end is the body's -------------------------

    def _arguments(self, choice: JSONObject, message: JSONObject) -> bool:
        """Calls past the first dropped under ``parallel_tool_calls: false``; each kept call's
        arguments fixed where the upstream turned that on (never a call cut by ``length``),
        then checked against its tool's schema."""
        calls = message.get("tool_calls")
        if not isinstance(calls, list) or not calls:
            return False
        changed = False
        if choice.get("finish_reason") != "length":  # a cut stays a cut
            split = unwrapped(
                calls,
                "function",
                rules=self._rules,
                repairs=self._repairs,
                cut=lambda _: False,
                read=_arguments_text,
                make=self._entry_call,
                name_of=_function_name,
            )
            if len(split) != len(calls) or any(
                a is not b for a, b in zip(split, calls, strict=True)
            ):
                calls = message["tool_calls"] = split
                changed = True
        if self._one_call and len(calls) > 1:
            self._repairs[Repair.PARALLEL_CALL_DROPPED] += len(calls) - 1
            calls = message["tool_calls"] = calls[:1]
            changed = True
        rules = self._rules
        if rules is None:
            return changed
        cut = choice.get("finish_reason") == "length"
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            name, text = function.get("name"), function.get("arguments")
            if not isinstance(text, str):
                continue
            fixed = rules.answer(
                name if isinstance(name, str) else None, text, self._repairs, cut=cut
            )
            if fixed is not text:
                function["arguments"] = fixed
                changed = True
        return changed

    def _entry_call(self, wrapper: JSONObject, name: str, arguments: str) -> JSONObject:
        """One call of a wrapper's (issue 24 item 6), with an id of its own."""
        return {
            "id": self._ids.fresh(),
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    def _call(self, call: object) -> JSONObject | None:
        """One call in canonical shape; None when its shape is not understood."""
        entry = read_entry(call)
        if entry is None or not isinstance(call, dict):
            return None
        for repair in entry.repairs:
            if repair is not Repair.INDEX_MISSING:  # a message's calls need no index
                self._record(repair)
        out: JSONObject = {}
        if entry.key is not None:
            out["index"] = entry.key
        if entry.id is None:
            self._record(Repair.ID_MISSING)
        out["id"] = entry.id if entry.id is not None else self._ids.fresh()
        if not entry.type_ok:
            self._record(Repair.TYPE_MISSING)
        out["type"] = "function"
        function: JSONObject = {}
        name, args = entry.name, entry.args
        if name is None and (grammar := grammar_call(args)) is not None:
            # TGI's grammar call, as a stream's at its end (chat/grammar_calls.py)
            name, args = grammar
            self._record(Repair.GRAMMAR_CALL)
        if name is None:
            self._record(Repair.NAME_MISSING)
            name = self._request.fallback_name
        if name is not None:
            function["name"] = name
        if not args:
            self._record(Repair.EMPTY_ARGUMENTS)
        function["arguments"] = args or "{}"
        function.update(entry.fn_extras)
        out["function"] = function
        out.update(entry.extras)
        return out

    def _finish(self, choice: JSONObject, message: JSONObject) -> bool:
        finish = choice.get("finish_reason")
        new = finish
        if isinstance(finish, str) and finish in _FINISH_MAP:
            self._record(Repair.FINISH_NONSTANDARD)
            new = _FINISH_MAP[finish]
        calls = message.get("tool_calls")
        if new == "stop" and isinstance(calls, list) and calls:
            if any(map(_cut_off, calls)):
                self._record(Repair.ARGS_TRUNCATED)  # no client may run a call cut off
                new = "length"
            else:
                self._record(Repair.FINISH_STOP_WITH_CALLS)
                new = "tool_calls"
        if new == finish:
            return False
        choice["finish_reason"] = new
        return True

    # -- a leading <think> block (issue 24 item 11) ------------------------------------------

    def _leading_think(self, message: JSONObject) -> bool:
        """Under ``think_in_content``, a leading ``<think>...</think>`` of the content is the
        message's reasoning, as a stream's is (chat/reasoning.py): under the field
        ``reasoning_field`` names (``reasoning_content`` for ``keep``), after any there."""
        content = message.get("content")
        if not self._options.think_in_content or not isinstance(content, str):
            return False
        split = leading_think(content)
        if split is None:
            return False
        self._record(Repair.THINK_IN_CONTENT)
        field = self._options.reasoning_field
        key = field if field in FIELDS else FIELDS[0]
        earlier = message.get(key)
        message[key] = (earlier if isinstance(earlier, str) else "") + split[0]
        message["content"] = split[1]
        return True

    # -- markup in text (Q32) ----------------------------------------------------------------

    def _extraction_on(self) -> bool:
        return bool(self._options.dialects) and self._request.allows_extraction

    def _extract(self, message: JSONObject) -> bool:
        names = self._options.dialects
        in_reasoning = dialects.reasoning_names(names, self._options.extract_from_reasoning)
        by_key = {"content": names, "reasoning_content": in_reasoning, "reasoning": in_reasoning}
        calls: list[JSONObject] = []
        texts: dict[str, str] = {}
        for key, key_names in by_key.items():
            text = message.get(key)
            if not isinstance(text, str) or not text:
                continue
            extractor = dialects.build_extractor(key_names, self._request.tools)
            if extractor is None:
                continue
            try:
                segments = extractor.feed(text)
                closing = extractor.close()
            except DialectError:
                self._record(Repair.DIALECT_ERROR)
                continue
            segments += closing
            # markup that broke or stopped inside a call came back as text (issue 24 item 4)
            if extractor.broken:
                self._repairs[Repair.MARKUP_BROKEN] += extractor.broken
            found = self._calls_from(segments, extractor)
            if found:
                calls += found
                texts[key] = "".join(s.text for s in segments if isinstance(s, Text))
        if not calls:
            return False
        for key, text in texts.items():
            message[key] = text if text.strip() or key != "content" else None
        message["tool_calls"] = calls
        return True

    def _calls_from(self, segments: list[Segment], extractor: Extractor) -> list[JSONObject]:
        calls: list[JSONObject] = []
        args: list[str] = []
        for seg in segments:
            match seg:
                case CallOpen(name=name, id=ident):
                    self._repairs[markup_kind(extractor, self._options.dialects)] += 1
                    args = []
                    calls.append(
                        {
                            "id": ident if ident else self._ids.fresh(),
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    )
                case CallArgs(text=text):
                    args.append(text)
                case CallClose():
                    if calls:
                        calls[-1]["function"]["arguments"] = "".join(args) or "{}"
                    args = []
        # no call is left open: the engine gives a call only once its markup closed, and a
        # block that breaks or is cut comes back as text (issue 24 item 4)
        return calls

    def _record(self, repair: Repair) -> None:
        self._repairs[repair] += 1


def _function_name(call: JSONObject) -> object:
    function = call.get("function")
    return function.get("name") if isinstance(function, dict) else None


def _arguments_text(call: JSONObject) -> str | None:
    function = call.get("function")
    text = function.get("arguments") if isinstance(function, dict) else None
    return text if isinstance(text, str) else None


def _cut_off(call: object) -> bool:
    """Whether a call's arguments are text that is not JSON (empty ones became ``"{}"``)."""
    function = call.get("function") if isinstance(call, dict) else None
    args = function.get("arguments") if isinstance(function, dict) else None
    return isinstance(args, str) and bool(args) and complete_json(args) is INVALID


def _ids(choices: list[object]) -> set[str]:
    """The ids already in the response, which a synthesized id must not repeat."""
    ids: set[str] = set()
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list):
            ids.update(
                c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)
            )
    return ids
