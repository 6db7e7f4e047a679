"""TGI's grammar tool calls (2.x to 3.0; issue 24 item 2), named and unwrapped at their end.

Text Generation Inference constrains the model with a grammar whose output is the whole call
object, and streams that object as the call's arguments: ``name`` is null on every delta, the
real name is the ``"_name"`` member inside, and the model's end-of-sequence token follows the
JSON (huggingface/text-generation-inference v3.0.0,
``integration-tests/models/test_tools_llama.py::test_flash_llama_grammar_tools_stream``)::

    {"function": {"_name": "get_current_weather", "location": "Paris, France"}}<|eot_id|>

A call that never got a name holds its arguments until it ends (calls/state.py, NAMELESS), so
they can be read whole then: the name is ``_name``, the arguments the inner object without it,
the end-of-sequence tokens of the known templates stripped.
"""

from __future__ import annotations

from typing import Final

from proxy.core.jsonvalues import INVALID, dumps_text, loads

# The end-of-sequence tokens of the chat templates TGI serves (Llama 2 / Mistral, Llama 3,
# ChatML, Gemma, Phi and GPT-2-style), stripped after the grammar's JSON.
EOS_TOKENS: Final = (
    "</s>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|end|>",
    "<end_of_turn>",
    "<eos>",
)


def without_eos(text: str) -> str:
    """``text`` without the end-of-sequence tokens (and whitespace) it ends with."""
    while True:
        stripped = text.rstrip()
        for token in EOS_TOKENS:
            if stripped.endswith(token):
                stripped = stripped[: -len(token)]
                break
        else:
            return stripped
        text = stripped


def grammar_call(arguments: str) -> tuple[str, str] | None:
    """The name and the arguments (JSON text) of a call whose arguments are TGI's grammar
    output, ``{"function": {"_name": NAME, ...}}`` and end-of-sequence tokens; None for any
    other text. The test is cheap to fail: it runs once, at the end of a call without a name."""
    if not arguments.lstrip().startswith('{"function"'):
        return None
    value = loads(without_eos(arguments))
    if value is INVALID or not isinstance(value, dict) or len(value) != 1:
        return None
    inner = value.get("function")
    if not isinstance(inner, dict):
        return None
    name = inner.pop("_name", None)
    if not isinstance(name, str) or not name:
        return None
    return name, dumps_text(inner)
