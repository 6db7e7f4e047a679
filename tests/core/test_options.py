"""Every per-upstream setting the core reads reaches it in one value (core/options.py), built
once per upstream from the settings (issue 26 item 2)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from proxy.core.errors import ConfigError
from proxy.core.options import UpstreamOptions
from proxy.settings import Settings, UpstreamSettings
from proxy.shell import app
from proxy.shell.app import build_upstreams


def test_each_upstream_gets_its_own_options_with_the_limits():
    settings = Settings(
        upstreams=[
            UpstreamSettings(
                name="a",
                url="http://127.0.0.1:1",
                output="coalesced",
                dialects=["hermes"],
                extract_from_reasoning=False,
                dedupe_calls=True,
                heal_arguments=True,
                coerce_arguments=True,
                enforce_parallel_tool_calls=False,
            ),
            UpstreamSettings(name="b", url="http://127.0.0.1:2", dialects="none"),
            UpstreamSettings(name="c", url="http://127.0.0.1:3", normalize=False),
        ],
        limits={
            "max_event_bytes": 2048,
            "max_held_bytes": 4096,
            "max_response_body_bytes": 8192,
        },
    )
    upstreams = build_upstreams(settings)
    limits: dict[str, Any] = {
        "max_event_bytes": 2048,
        "max_held_bytes": 4096,
        "max_response_body_bytes": 8192,
    }
    assert upstreams["a"].normalize == UpstreamOptions(
        coalesce=True,
        dialects=("hermes",),
        extract_from_reasoning=False,
        dedupe_calls=True,
        heal_arguments=True,
        coerce_arguments=True,
        enforce_parallel_tool_calls=False,
        **limits,
    )
    assert upstreams["b"].normalize == UpstreamOptions(**limits)
    assert upstreams["c"].normalize is None  # passthrough: nothing is rewritten


@dataclasses.dataclass(frozen=True, slots=True)
class _WithLimit(UpstreamOptions):
    max_tools: int = 0  # a field named like a setting of limits


@dataclasses.dataclass(frozen=True, slots=True)
class _WithOrphan(UpstreamOptions):
    fancy: bool = False  # a field no setting fills


def test_a_field_named_like_a_setting_is_copied_and_one_no_setting_fills_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
):
    """Adding a per-upstream setting the core reads is a field here and a setting of the same
    name, nothing between (issue 27): upstream_options copies it by name, and a field that no
    setting fills is an error naming it, not a default kept silently."""
    settings = Settings(
        upstreams=[UpstreamSettings(name="a", url="http://127.0.0.1:1")],
        limits={"max_tools": 7},
    )
    monkeypatch.setattr(app, "UpstreamOptions", _WithLimit)
    options = app.upstream_options(settings.upstreams[0], settings)
    assert isinstance(options, _WithLimit)
    assert options.max_tools == 7
    monkeypatch.setattr(app, "UpstreamOptions", _WithOrphan)
    with pytest.raises(ConfigError, match=r"UpstreamOptions\.fancy has no setting"):
        app.upstream_options(settings.upstreams[0], settings)
