"""What an upstream's chat template needs of a request beyond what every template needs.

Known from the template itself where the upstream shows it (llama-server's ``GET /props``
returns ``chat_template``: :func:`needs_of_template` recognises each need by the template's own
words), or from the family the operator names (``template = "mistral"``, :data:`FAMILIES`) where
the server does not (vLLM, SGLang and most others).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final


@dataclass(frozen=True, slots=True)
class TemplateNeeds:
    #: tool call ids of exactly nine letters and digits (Mistral Nemo, Small 3.x, Devstral)
    mistral_ids: bool = False
    #: no system role: the system text goes into the first user message (Gemma 2)
    no_system_role: bool = False
    #: tool parameter types looked up in a table (Command-R+, Hermes): no type lists
    #: (schemas.py rewrites them without loss)
    schema_lookup: bool = False
    #: ... and arrays unreadable too (Command-R+ reads ``json_spec.items``, the method)
    schema_arrays: bool = False
    #: one type string on every parameter (Seed-OSS's ``py_type``; lossy, schemas.py)
    schema_single_types: bool = False
    #: no tool role: tool calls and results told as text (Gemma 2)
    no_tool_role: bool = False
    #: turns that alternate user and assistant, tool calls and results skipped: a user
    #: message right after tool results needs an assistant turn before it (Mistral, Gemma)
    alternating_turns: bool = False
    #: one tool call per assistant message: parallel calls of earlier turns are told one
    #: call and its result at a time (Llama 3.1-3.3: "only supports single tool-calls")
    single_calls: bool = False

    def __or__(self, other: TemplateNeeds) -> TemplateNeeds:
        return replace(
            self,
            mistral_ids=self.mistral_ids or other.mistral_ids,
            no_system_role=self.no_system_role or other.no_system_role,
            schema_lookup=self.schema_lookup or other.schema_lookup,
            schema_arrays=self.schema_arrays or other.schema_arrays,
            schema_single_types=self.schema_single_types or other.schema_single_types,
            no_tool_role=self.no_tool_role or other.no_tool_role,
            single_calls=self.single_calls or other.single_calls,
            alternating_turns=self.alternating_turns or other.alternating_turns,
        )


GENERIC: Final = TemplateNeeds()

#: ``template = "<family>"``: the needs of a family whose template the server does not show
FAMILIES: Final[dict[str, TemplateNeeds]] = {
    "generic": GENERIC,
    "mistral": TemplateNeeds(mistral_ids=True, alternating_turns=True),
    "gemma2": TemplateNeeds(no_system_role=True, alternating_turns=True, no_tool_role=True),
    "llama3": TemplateNeeds(single_calls=True),
    "command_r": TemplateNeeds(schema_lookup=True, schema_arrays=True),
    "hermes": TemplateNeeds(schema_lookup=True),
    "seed_oss": TemplateNeeds(schema_single_types=True),
}

# The words by which a template shows each need (the templates of llama.cpp's
# models/templates/, which are the models' own).
_MISTRAL_IDS: Final = re.compile(r"alphanumeric strings with length 9|\|\s*length\s*!=\s*9")
_NO_SYSTEM: Final = re.compile(r"System role not supported")
_ALTERNATING: Final = re.compile(r"roles must alternate", re.IGNORECASE)
_SINGLE_CALLS: Final = re.compile(r"only supports single tool-calls")
# a table of type names looked up by a parameter's type (Command-R, Hermes); Command-R's
# arrays read `json_spec.items`; Seed-OSS's macro takes one type string
_TYPE_LOOKUP: Final = re.compile(r"basic_type_map\[json_spec\.type\]")
_ARRAY_ITEMS: Final = re.compile(r"json_to_python_type\(json_spec\.items\)")
_SINGLE_TYPE: Final = re.compile(r"py_type\(spec\.type\)")
# a template that names no tool role, no tool calls and no tool results
_TOOL_WORDS: Final = re.compile(r"tool", re.IGNORECASE)


def needs_of_template(template: str) -> TemplateNeeds:
    return TemplateNeeds(
        mistral_ids=_MISTRAL_IDS.search(template) is not None,
        no_system_role=_NO_SYSTEM.search(template) is not None,
        schema_lookup=_TYPE_LOOKUP.search(template) is not None,
        schema_arrays=_ARRAY_ITEMS.search(template) is not None,
        schema_single_types=_SINGLE_TYPE.search(template) is not None,
        no_tool_role=_TOOL_WORDS.search(template) is None,
        single_calls=_SINGLE_CALLS.search(template) is not None,
        alternating_turns=_ALTERNATING.search(template) is not None,
    )


def family_names() -> tuple[str, ...]:
    return tuple(FAMILIES)
