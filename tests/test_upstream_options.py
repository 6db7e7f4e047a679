"""Every per-upstream setting the core reads reaches it in one value (core/options.py), built
once per upstream from the settings (issue 26 item 2)."""

from __future__ import annotations

from typing import Any

from proxy.core.options import UpstreamOptions
from proxy.settings import Settings, UpstreamSettings
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
