"""The rewrite decision is a pure function of the request and the upstream's settings."""

from __future__ import annotations

import dataclasses

import pytest

from proxy.core.policy import Mode, Plan, own_key_plans, plan_request, rewrites_response
from proxy.core.protocols import registry
from proxy.core.protocols.base import ChatRequest, ClientProtocol


def _unused(*args: object) -> object:
    raise AssertionError("not called by the policy")


FAKE = ClientProtocol(
    name="fake",
    path_suffix="/fake",
    to_chat=lambda body: ChatRequest(body),
    encoder=_unused,  # type: ignore[arg-type]
    error_body=lambda status, message: b"",
    native=_unused,  # type: ignore[arg-type]
    native_completion=_unused,  # type: ignore[arg-type]
    local={"/count": lambda body: {"n": 1}},
)


@pytest.fixture
def fake_protocol(monkeypatch):
    monkeypatch.setitem(registry.CLIENT_PROTOCOLS, "fake", FAKE)


@pytest.mark.parametrize(
    ("method", "path", "normalize", "mode"),
    [
        ("POST", "/v1/chat/completions", True, Mode.CHAT),
        ("POST", "/v1/chat/completions", False, Mode.PASSTHROUGH),
        ("GET", "/v1/chat/completions", True, Mode.PASSTHROUGH),
        ("POST", "/v1/embeddings", True, Mode.PASSTHROUGH),
    ],
)
def test_chat_and_passthrough(method, path, normalize, mode):
    assert plan_request(method, path, normalize=normalize, modes={}).mode is mode


def test_a_client_protocol_translates_by_default_to_the_chat_path_under_its_prefix(fake_protocol):
    plan = plan_request("POST", "/prefix/v1/fake", normalize=True, modes={})
    assert plan == Plan(Mode.TRANSLATE, FAKE, upstream_path="/prefix/v1/chat/completions")


def test_native_mode_sends_the_request_to_the_upstreams_own_endpoint(fake_protocol):
    plan = plan_request("POST", "/v1/fake", normalize=True, modes={"fake": "native"})
    assert plan == Plan(Mode.NATIVE, FAKE)


def test_normalize_off_passes_a_client_protocol_through(fake_protocol):
    assert plan_request("POST", "/v1/fake", normalize=False, modes={}).mode is Mode.PASSTHROUGH


def test_a_local_answer_in_translate_mode_is_forwarded_in_native_mode(fake_protocol):
    local = plan_request("POST", "/v1/fake/count", normalize=True, modes={})
    assert local.mode is Mode.LOCAL
    assert local.local is not None
    assert local.local({}) == {"n": 1}
    native = plan_request("POST", "/v1/fake/count", normalize=True, modes={"fake": "native"})
    assert native.mode is Mode.PASSTHROUGH


@pytest.mark.parametrize(
    ("status", "media_type", "encoded", "rewritten"),
    [
        (200, "text/event-stream", False, True),
        (200, "application/json", False, True),
        (200, "text/event-stream", True, False),
        (400, "application/json", False, False),
        (200, "text/plain", False, False),
    ],
)
def test_which_responses_are_rewritten(status, media_type, encoded, rewritten):
    assert rewrites_response(Plan(Mode.CHAT), status, media_type, encoded) is rewritten
    assert rewrites_response(Plan(Mode.PASSTHROUGH), status, media_type, encoded) is False


def test_chat_completions_is_a_registered_protocol_repaired_in_place():
    """Chat is in the registry like the others (issue 27): its plan carries it, and it has no
    translate mode, so no upstream setting picks one for it."""
    chat = registry.CLIENT_PROTOCOLS["chat"]
    assert plan_request("POST", "/v1/chat/completions", normalize=True, modes={}) == Plan(
        Mode.CHAT, chat
    )
    assert not chat.translates
    assert chat not in registry.translated_protocols()
    assert [p.name for p in registry.translated_protocols()] == ["responses", "messages"]


def test_a_translated_request_goes_to_the_chat_protocols_own_path(fake_protocol, monkeypatch):
    """The upstream path is the chat protocol's (its ``path_suffix``), not a constant."""
    moved = dataclasses.replace(registry.CHAT, path_suffix="/chat/elsewhere")
    monkeypatch.setattr(registry, "CHAT", moved)
    plan = plan_request("POST", "/prefix/v1/fake", normalize=True, modes={})
    assert plan.upstream_path == "/prefix/v1/chat/elsewhere"


def test_the_protocols_with_a_key_header_of_their_own_say_how_they_would_go():
    """GET /v1/models asks each upstream as a request of such a protocol would reach it, so
    that the shell names no protocol (issue 27): Messages takes its key in x-api-key."""
    messages = registry.CLIENT_PROTOCOLS["messages"]
    assert messages.key_header == "x-api-key"
    assert [p.key_header for p in registry.CLIENT_PROTOCOLS.values()] == [None, None, "x-api-key"]
    assert own_key_plans(normalize=True, modes={}) == [
        Plan(Mode.TRANSLATE, messages, upstream_path="/v1/chat/completions")
    ]
    assert own_key_plans(normalize=True, modes={"messages": "native"}) == [
        Plan(Mode.NATIVE, messages)
    ]
    assert own_key_plans(normalize=False, modes={}) == [Plan(Mode.PASSTHROUGH)]
