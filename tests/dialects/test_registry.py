"""The registry: names, "auto", and the extractor it builds."""

from __future__ import annotations

import pytest

from proxy.dialects import DIALECTS, build_extractor, check_names
from proxy.dialects.base import Text
from proxy.errors import ConfigError
from tests.dialects.examples import SAMPLES
from tests.dialects.helpers import TOOLS, calls, run


def test_every_dialect_is_registered_with_a_sample():
    assert set(DIALECTS) == set(SAMPLES)
    assert all(name == cls.name for name, cls in DIALECTS.items())


def test_auto_means_all_and_unknown_names_list_the_known_ones():
    assert check_names(["auto"]) == tuple(DIALECTS)
    with pytest.raises(ConfigError, match=r"known: .*hermes.*auto"):
        check_names(["hermes", "klingon"])


def test_no_dialect_builds_no_extractor():
    assert build_extractor([], TOOLS) is None


@pytest.mark.parametrize("name", SAMPLES)
def test_auto_recognises_every_dialect(name):
    assert calls(run([SAMPLES[name]], ["auto"]))


@pytest.mark.parametrize("name", SAMPLES)
def test_a_dialect_not_enabled_leaves_its_markup_alone(name):
    others = [other for other in DIALECTS if other != name and other != "hermes"]
    sample = SAMPLES[name]
    if name in ("qwen3_coder", "glm"):  # they share <tool_call> with hermes
        others.remove("qwen3_coder" if name == "glm" else "glm")
    assert run([sample], others) == [Text(sample)]


def test_tools_that_are_not_function_objects_do_not_break_the_extractor():
    junk = ["get_weather", {"type": "function"}, {"function": {"name": 3}}, None]
    content = '[get_weather(city="Paris")]'
    assert run([content], ["pythonic"], tools=junk) == [Text(content)]
