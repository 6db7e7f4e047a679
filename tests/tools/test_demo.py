"""``toolcall-proxy demo`` on the installed package: a replay upstream and the proxy on free
loopback ports, real recorded broken streams, the calls a client reconstructs both ways."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from proxy.tools.demo import accumulate


def test_demo_recovers_every_recorded_stream_that_breaks_a_client_directly():
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    results = {r["stream"]: r for r in json.loads(done.stdout)}
    assert all(r["recovered"] for r in results.values())
    old = results["llamacpp-b5494-one-tool-call"]
    assert not old["direct_recovered"]
    assert old["direct"]["calls"][0]["name"].startswith("get_weatherget_weather")
    assert old["proxy"]["calls"] == [
        {
            "id": "HRG4b9srzgVW8UQRSj7dkd0L4JEZFdhT",
            "name": "get_weather",
            "arguments": '{"location":"Paris","unit":"celsius"}',
            "ids": 1,
        }
    ]
    mistral = results["mistral-api-no-index-no-type"]
    assert mistral["direct"]["lost"] == 1
    assert [c["name"] for c in mistral["proxy"]["calls"]] == ["weather"]
    assert sum(not r["direct_recovered"] for r in results.values()) >= 3


def test_demo_text_output_names_each_stream():
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "5 of 5 streams recovered through the proxy" in done.stdout
    assert "without the proxy: broken" in done.stdout


def test_a_call_with_a_repeated_id_or_no_index_is_not_recovered():
    chunk: dict[str, Any] = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "id": "0", "function": {"name": "f", "arguments": "{}"}}
                    ]
                },
            }
        ]
    }
    twice = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for _ in range(2))
    outcome = accumulate(twice)
    assert outcome.calls[0].id == "00"
    assert not outcome.recovered(["f"])
    del chunk["choices"][0]["delta"]["tool_calls"][0]["index"]
    assert accumulate(b"data: " + json.dumps(chunk).encode() + b"\n\n").lost == 1
