"""The registry of repair kinds: every change the normalizer can make, and what it detects.

The names are the short names of docs/quirks.md (its numbers are in the comments), so a
metric labelled ``kind="name-repeated"`` leads straight to the evidence. Kinds without a
number come from the canonical chat stream's rules there or from failing open.
The metrics code enumerates :class:`Repair`; the normalizers count ``Repair`` values (plain
strings) in a ``Counter[str]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Final

from proxy.core.markup.base import Extractor


class Repair(StrEnum):
    # Tool-call entries (docs/quirks.md Q1-Q34, N1-N9)
    NAME_REPEATED = "name-repeated"  # Q1
    NAME_BOGUS = "name-empty-or-bogus-on-continuation"  # Q2
    ID_INSIDE_FUNCTION = "id-inside-function"  # Q3
    TYPE_MISSING = "type-missing"  # Q3 (also a type other than "function")
    ID_REPEATED = "id-repeated"  # Q4
    TYPE_REPEATED = "type-repeated"  # Q5
    EXPLICIT_NULL_FIELDS = "explicit-null-fields"  # Q6
    ID_MISSING = "id-missing"  # Q7: an id was synthesized
    ID_NOT_A_STRING = "id-not-a-string"  # N2: TGI's integer id
    INDEX_MISSING = "index-missing"  # Q8
    INDEX_NOT_INT = "index-not-int"  # Q9
    INDEX_REUSED = "index-reused"  # Q10: a new call under an index already in use
    INDEX_OFFSET = "index-offset"  # Q11: renumbered densely from 0
    SAME_INDEX_TWICE = "same-index-twice-in-one-delta"  # Q12
    ARGS_IN_FIRST_DELTA = "args-in-first-delta"  # Q13: partial arguments moved out
    NAME_AFTER_ARGS = "name-after-args"  # Q14: held until the name came
    FIRST_DELTA_WITHOUT_ARGUMENTS = "first-delta-without-arguments"  # Q15
    ARGS_DUPLICATED_AT_END = "args-duplicated-at-end"  # Q17
    ARGS_NOT_JSON = "args-not-json"  # Q18: detected only, a call ended with invalid JSON
    ARGUMENTS_NOT_A_STRING = "arguments-not-a-string"  # Q19
    TOOL_CALLS_NOT_AN_ARRAY = "tool_calls-not-an-array"  # Q20
    TOOL_CALLS_EMPTY = "tool_calls-empty"  # Q21: `[]` or null dropped
    PARAMETERS_NOT_ARGUMENTS = "parameters-instead-of-arguments"  # N2 (TGI 1.4)
    TOOL_CALLS_BESIDE_MESSAGE = "tool_calls-beside-message"  # N4 (text-generation-webui)

    # The chunk's envelope (docs/quirks.md rules 2-4)
    OBJECT_MISSING = "object-missing"  # `object` absent or not "chat.completion.chunk"
    DELTA_MISSING = "delta-missing"  # Q29: a choice without `delta` gets `{}`
    ROLE_MISSING = "role-missing"  # the first delta of a choice gets `role: "assistant"`

    # Termination
    FINISH_STOP_WITH_CALLS = "finish-reason-stop"  # Q23
    FINISH_NONSTANDARD = "finish-reason-nonstandard"  # Q24
    NO_FINISH_CHUNK = "no-finish-chunk"  # Q25
    FINISH_ON_TOOL_CALL_CHUNK = "finish-on-tool-call-chunk"  # Q26
    FINISH_EARLY = "finish-early"  # issue 24 item 1: a finish more of the choice followed
    MISSING_DONE = "missing-done"  # Q27
    # a finish the proxy would write as tool_calls (Q23, Q25) is "length": a call was cut off
    ARGS_TRUNCATED = "args-truncated"
    ERROR_FIELD = "error-field"  # Q30: llama.cpp's `error:` SSE line
    # issue 24 item 7: a native stream's error in a shape its clients do not read
    # (llama-server b11434's bare `data: {"error": ...}` on /v1/responses, its
    # `{"code", "message", "type": "server_error"}` on /v1/messages)
    ERROR_RESHAPED = "error-reshaped"
    # issue 24 item 8: llama-server's "Failed to parse input at pos N: <text>" answered with
    # the calls the text holds (proxy/core/parse_failure.py)
    PARSE_FAILURE_RECOVERED = "parse-failure-recovered"

    # The canonical form (docs/quirks.md rules 5-10, and the client matrix's case m)
    CONTENT_BESIDE_TOOL_CALLS = "content-beside-tool-calls"  # rule 5
    SEVERAL_CALLS_IN_ONE_DELTA = "several-calls-in-one-delta"  # rule 7
    ARGS_PLACEHOLDER = "args-placeholder"  # case m: `"{}"` in front of the real arguments
    EMPTY_ARGUMENTS = "empty-arguments"  # rule 10: a call without argument text gets "{}"
    NAME_MISSING = "name-missing"  # a call ended without a name (taken from the request if it can)
    # issue 24 item 2: TGI's grammar call, named by the `_name` inside its wrapped arguments
    GRAMMAR_CALL = "grammar-call"
    # a call equal to the one before it, or the k-th markup call equal to the k-th structured
    # call while every markup call before it was a copy (issue 24 item 5): counted;
    # dropped when from markup, or under dedupe_calls (llama.cpp#21882)
    CALL_DUPLICATED = "call-duplicated"

    # Markup in content (Q32) and failing open
    # a call extracted from text; recorded as "markup-in-content:<dialect>" (markup_kind)
    MARKUP_IN_CONTENT = "markup-in-content"
    # markup that broke or ended inside a call, given back as its text (issue 24 item 4)
    MARKUP_BROKEN = "markup-broken"
    # issue 24 item 11: reasoning moved to the field the upstream's reasoning_field names
    REASONING_FIELD_RENAMED = "reasoning-field-renamed"
    # issue 24 item 11: a leading <think> block in content made reasoning (think_in_content)
    THINK_IN_CONTENT = "think-in-content"
    # issue 24 item 3: an unfinished block naming a structured call that followed it, dropped
    MARKUP_FRAGMENT_DROPPED = "markup-fragment-dropped"
    DIALECT_ERROR = "dialect-error"  # a dialect raised; extraction stopped for the stream
    CAP_REACHED = "cap-reached"  # max_held_bytes reached: the rest of the stream went raw

    # A server's own Messages stream (docs/quirks.md M1-M4, "llama.cpp's own endpoints";
    # a missing `event:` line is EVENT_LINE_MISSING below)
    TOOL_USE_INPUT_MISSING = "tool-use-input-missing"  # M1: llama.cpp PR #22960
    THINKING_SIGNATURE_MISSING = "thinking-signature-missing"  # M1: llama.cpp#20090
    EMPTY_FIELD_DROPPED = "empty-field-dropped"  # M2: text, partial_json, usage restored
    STOP_REASON_EMPTY = "stop-reason-empty"  # M2: "" for null
    STOP_REASON_NOT_TOOL_USE = "stop-reason-not-tool-use"  # end_turn or "" after tool_use blocks
    TOOL_INPUT_UNPARSABLE = "tool-input-unparsable"  # a finished turn's tool input is no JSON
    BLOCK_STOP_MISSING = "block-stop-missing"  # M3: a block never stopped
    MESSAGE_DELTA_MISSING = "message-delta-missing"  # the stream ended without message_delta
    MESSAGE_STOP_MISSING = "message-stop-missing"  # M3: ... or without message_stop
    # issue 24 item 1's Messages twin: a message_delta that blocks (or another) followed
    MESSAGE_DELTA_EARLY = "message-delta-early"
    MESSAGE_START_MISSING = "message-start-missing"  # a block before any message_start
    MESSAGE_START_REPEATED = "message-start-repeated"  # M4: duplicated or spliced
    # M4, issue 24 item 9: ... after blocks of the first: a second generation spliced in
    GENERATION_SPLICED = "generation-spliced"
    BLOCKS_OVERLAP = "blocks-overlap"  # llama.cpp: a block started before the last one stopped
    DELTA_AFTER_STOP = "delta-after-stop"  # a delta for a block already stopped: dropped

    # A server's own Responses stream (native mode; docs/quirks.md R1-R10 and "llama.cpp's
    # own endpoints")
    SEQUENCE_NUMBER_MISSING = "sequence-number-missing"  # R8, llama.cpp: numbered from 0
    EVENT_LINE_MISSING = "event-line-missing"  # no `event:` line equal to the type
    OUTPUT_INDEX_MISSING = "output-index-missing"  # llama.cpp: absent or not the position
    CONTENT_INDEX_WRONG = "content-index-wrong"  # R5: a new index on every text delta
    TEXT_FIELDS_MISSING = "text-fields-missing"  # llama.cpp: logprobs, annotations
    ITEM_ID_MISSING = "item-id-missing"  # R5, R7: an empty or absent item id / item_id
    ITEM_ID_ROTATING = "item-id-rotating"  # R2: a new item id on every event
    RESPONSE_ID_ROTATING = "response-id-rotating"  # R2
    RESPONSE_FIELDS_MISSING = "response-fields-missing"  # R7, llama.cpp: id, created_at, model
    CREATED_MISSING = "response-created-missing"  # the stream did not open with it
    CALL_ID_MISSING = "call-id-missing"  # R6: an empty call_id in output_item.added
    ITEM_ADDED_MISSING = "output-item-added-missing"  # R7: deltas before any added
    # issue 24 item 10: a message's output_item.added already holding its empty part
    MESSAGE_ADDED_WITH_CONTENT = "message-added-with-content"
    ITEMS_INTERLEAVED = "items-interleaved"  # R10, llama.cpp: an item began before one ended
    ARGS_ONLY_IN_DONE = "arguments-only-in-done"  # R1: no argument deltas
    ARGS_DONE_MISSING = "arguments-done-missing"  # llama.cpp: no function_call_arguments.done
    ITEM_DONE_MISSING = "output-item-done-missing"  # R3
    OUTPUT_INCOMPLETE = "completed-output-incomplete"  # R3, R7: output lacks streamed items
    USAGE_MISSING = "usage-missing"  # R7
    CUT_AS_COMPLETED = "cut-reported-as-completed"  # llama.cpp: a token-limit cut "completed"
    CREATED_REPEATED = "response-created-repeated"  # a second response.created: dropped
    EVENT_AFTER_TERMINAL = "event-after-terminal"  # after completed/incomplete/failed: dropped
    NONSTANDARD_EVENT = "nonstandard-event"  # R8: detected only, passed through
    # R9, issue 24 item 6: the model's multi-call wrapper split into its calls
    PARALLEL_WRAPPER = "parallel-wrapper"

    # A call's arguments against its tool's schema (issue 25; proxy/core/arguments/)
    # detected only: a call whose arguments do not fit, recorded as
    # "args-schema-mismatch:<kind>" (Mismatch.label; the kinds are MismatchKind)
    ARGS_SCHEMA_MISMATCH = "args-schema-mismatch"
    ARGS_HEALED = "args-healed"  # heal_arguments: almost-JSON made JSON that fits
    ARGS_COERCED = "args-coerced"  # coerce_arguments: "5" for 5, "a.py" for ["a.py"]
    # a call past the first when the request said parallel_tool_calls: false
    PARALLEL_CALL_DROPPED = "parallel-call-dropped"

    # The request side: the chat request reshaped so that the upstream's chat template takes
    # it (proxy/core/request_repairs/; counted with side="request", REQUEST_SIDE below)
    DEVELOPER_ROLE = "developer-role"  # `developer` for `system`
    SYSTEM_NOT_FIRST = "system-not-first"  # several system messages, or one past the first
    TEXT_PARTS_AS_LIST = "text-parts-as-list"  # a content part list holding only text
    SAME_ROLE_CONSECUTIVE = "same-role-consecutive"  # user after user, assistant after assistant
    CALL_CONTENT_NULL = "tool-call-content-null"  # an assistant's calls with content null
    FIRST_TURN_NOT_USER = "first-turn-not-user"  # the first message past the system one
    PARALLEL_CALLS_UNSUPPORTED = "parallel-calls-unsupported"  # Llama 3.x: one call a message
    USER_AFTER_TOOL_RESULTS = "user-after-tool-results"  # Mistral: turns must alternate
    CALL_ID_NOT_MISTRAL = "call-id-not-mistral"  # Mistral: ids of nine letters and digits
    SYSTEM_ROLE_UNSUPPORTED = "system-role-unsupported"  # Gemma 2: no system role
    SCHEMA_TYPE_LIST = "schema-type-list"  # `"type": ["string", "null"]` in a tool's schema
    SCHEMA_UNION = "schema-union"  # `anyOf` / `oneOf` under a template that takes one type
    SCHEMA_TYPE_MISSING = "schema-type-missing"  # a parameter without a type (Seed-OSS)
    SCHEMA_ARRAY_TYPE = "schema-array-type"  # Command-R+ cannot render an array's type
    TOOL_ROLE_UNSUPPORTED = "tool-role-unsupported"  # Gemma 2: calls and results as text
    # ... and a native Responses request (responses/native_tools.py)
    NAMESPACE_TOOL = "namespace-tool"  # flattened into functions (Codex's multi_agent_v1)
    CUSTOM_TOOL = "custom-tool"  # a freeform tool sent as a function with one `input`
    HOSTED_TOOL = "hosted-tool"  # web_search and the like: OpenAI's own, dropped
    TEXT_WITHOUT_FORMAT = "text-without-format"  # `text: {verbosity}`: LM Studio refuses it


# Kinds that report what was seen without changing a byte (docs/quirks.md Q18, R8; a
# schema mismatch, issue 25).
# A repeated call is dropped only from markup (which comes with markup-in-content) or under
# dedupe_calls; otherwise it is only counted. Native Responses' R8 passes through.
DETECTED_ONLY: Final = frozenset(
    {
        Repair.ARGS_NOT_JSON,
        Repair.CALL_DUPLICATED,
        Repair.NONSTANDARD_EVENT,
        Repair.ARGS_SCHEMA_MISMATCH,
        # ... as counted, with the kind of mismatch (proxy/core/arguments/check.py's
        # MismatchKind, which a test holds to this list)
        *(
            f"{Repair.ARGS_SCHEMA_MISMATCH}:{kind}"
            for kind in ("unknown-tool", "required", "unknown-property", "type", "enum", "other")
        ),
    }
)


# The kinds of the request side (metrics label side="request"); every other kind is the
# response's.
REQUEST_SIDE: Final = frozenset(
    {
        Repair.DEVELOPER_ROLE,
        Repair.SYSTEM_NOT_FIRST,
        Repair.TEXT_PARTS_AS_LIST,
        Repair.SAME_ROLE_CONSECUTIVE,
        Repair.CALL_CONTENT_NULL,
        Repair.FIRST_TURN_NOT_USER,
        Repair.PARALLEL_CALLS_UNSUPPORTED,
        Repair.USER_AFTER_TOOL_RESULTS,
        Repair.CALL_ID_NOT_MISTRAL,
        Repair.SYSTEM_ROLE_UNSUPPORTED,
        Repair.SCHEMA_TYPE_LIST,
        Repair.SCHEMA_UNION,
        Repair.SCHEMA_TYPE_MISSING,
        Repair.SCHEMA_ARRAY_TYPE,
        Repair.TOOL_ROLE_UNSUPPORTED,
        Repair.NAMESPACE_TOOL,
        Repair.CUSTOM_TOOL,
        Repair.HOSTED_TOOL,
        Repair.TEXT_WITHOUT_FORMAT,
    }
)


def markup_kind(extractor: Extractor | None, configured: Sequence[str]) -> str:
    """``markup-in-content:<dialect>``: the operations metrics count extracted calls per dialect.

    The extractor names the dialect whose block opened the call; should it not know, a single
    configured dialect is the answer.
    """
    name = extractor.dialect if extractor is not None else None
    if name is None:
        name = configured[0] if len(configured) == 1 else "unknown"
    return f"{Repair.MARKUP_IN_CONTENT}:{name}"
