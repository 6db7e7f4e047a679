"""The registry of tool-call markup dialects: the one place that lists them.

``DIALECTS`` maps the name used in the config to the class; ``build_extractor`` makes the
per-choice parser for a request. Unknown names are a configuration error that lists the known
ones (``check_names``), raised at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Final

from proxy.core.errors import ConfigError
from proxy.core.markup.base import Extractor, Tools
from proxy.core.markup.block import Dialect
from proxy.core.markup.deepseek import DeepSeek
from proxy.core.markup.deepseek_v32 import DeepSeekV32
from proxy.core.markup.extractor import MarkupExtractor, PlainText
from proxy.core.markup.extractor import plain_text as extractor_plain_text
from proxy.core.markup.gemma4 import Gemma4
from proxy.core.markup.glm import Glm
from proxy.core.markup.granite import Granite
from proxy.core.markup.harmony import Harmony
from proxy.core.markup.hermes import Hermes
from proxy.core.markup.hunyuan import Hunyuan
from proxy.core.markup.kimi_k2 import KimiK2
from proxy.core.markup.lfm2 import Lfm2
from proxy.core.markup.llama3_json import Llama3Json
from proxy.core.markup.minimax import MiniMax
from proxy.core.markup.mistral import Mistral
from proxy.core.markup.nemotron import Nemotron
from proxy.core.markup.pythonic import Pythonic
from proxy.core.markup.qwen3_coder import Qwen3Coder
from proxy.core.markup.seed_oss import SeedOss
from proxy.core.markup.step3 import Step3

# Order matters where dialects share a marker (<tool_call>): the first to recognise the
# block's content takes it.
DIALECTS: Final[Mapping[str, type[Dialect]]] = {
    dialect.name: dialect
    for dialect in (
        Hermes,
        Qwen3Coder,
        SeedOss,
        Glm,
        MiniMax,
        Mistral,
        Llama3Json,
        Pythonic,
        DeepSeek,
        DeepSeekV32,
        Step3,
        KimiK2,
        Harmony,
        Granite,
        Gemma4,
        Hunyuan,
        Nemotron,
        Lfm2,
    )
}


def check_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate configured dialect names; "auto" means all of them."""
    return _checked(tuple(names))


# Asked for every stream and every choice with the upstream's one configured tuple: worked
# out once per configuration (an unknown name raises each time; nothing is cached for it).
@cache
def _checked(names: tuple[str, ...]) -> tuple[str, ...]:
    if names == ("auto",):
        return tuple(DIALECTS)
    unknown = [n for n in names if n not in DIALECTS]
    if unknown:
        known = ", ".join(sorted(DIALECTS)) or "(none)"
        raise ConfigError(f"unknown dialect(s) {', '.join(unknown)}; known: {known}, auto")
    return names


def reasoning_names(names: Sequence[str], setting: bool | str) -> tuple[str, ...]:
    """The dialects looked for in reasoning text (``extract_from_reasoning``): all of
    ``names`` (true), none (false), or those whose models are known to write their calls in
    their reasoning ("auto", ``Dialect.in_reasoning``)."""
    return _in_reasoning(check_names(names), setting)


@cache
def _in_reasoning(selected: tuple[str, ...], setting: bool | str) -> tuple[str, ...]:
    if setting == "auto":
        return tuple(name for name in selected if DIALECTS[name].in_reasoning)
    return selected if setting is True else ()


def build_extractor(names: Sequence[str], tools: Tools, *, begun: bool = False) -> Extractor | None:
    """The content parser for one choice, or None when no dialect applies (``begun``: see
    :class:`MarkupExtractor`)."""
    selected = check_names(names)
    if not selected:
        return None
    return MarkupExtractor([DIALECTS[name](tools) for name in selected], begun=begun)


@cache
def plain_text(names: tuple[str, ...]) -> PlainText | None:
    """What text an extractor of ``names`` would give back whole before one is built, once
    per configuration; None when no dialect applies (no extractor either)."""
    selected = check_names(names)
    return extractor_plain_text(tuple(DIALECTS[name] for name in selected)) if selected else None
