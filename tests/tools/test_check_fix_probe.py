"""The operator tools behind ``toolcall-proxy COMMAND``: check, fix and probe."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from proxy.cli import COMMANDS, build_parser, main
from tests.conftest import UPSTREAM_FIXTURES, StartUpstream, upstream_url
from tests.support.sockets import free_port
from tests.support.streams import split_events

ROOT = Path(__file__).parents[2]
SHIPPED_CONFIGS = sorted(ROOT.glob("config/*.toml")) + sorted(ROOT.glob("deploy/config/*.toml"))


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(text)
    return path


# check ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED_CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_check_accepts_every_shipped_config_and_lists_its_upstreams(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "x")
    assert main(["check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"config: {path}: valid\n")
    from proxy.settings import load_settings

    for upstream in load_settings(path).upstreams:
        [row] = [line for line in out.splitlines() if f"  {upstream.name}  " in line]
        assert ", ".join(upstream.replica_urls()) in row
        assert ", ".join(upstream.models) in row


def test_check_prints_the_routing_table_in_match_order_with_the_fallbacks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "x")
    assert main(["check", "--config", str(ROOT / "config/two-upstreams.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("#  UPSTREAM"))
    assert re.split(r"\s{2,}", lines[header]) == [
        "#",
        "UPSTREAM",
        "URL",
        "MODELS",
        "API KEY",
        "OUTPUT",
        "DIALECTS",
    ]
    llama, vllm = lines[header + 1], lines[header + 2]
    assert llama.split()[:3] == ["1", "llama", "http://127.0.0.1:8080"]
    assert "streamed" in llama
    assert vllm.split()[:3] == ["2", "vllm", "http://127.0.0.1:8000"]
    assert "coalesced" in vllm
    assert "$VLLM_API_KEY" in vllm
    assert llama.split()[-1] == vllm.split()[-1] == "auto"
    assert any(line.startswith("Dialects tried by 'auto': hermes") for line in lines)
    assert "A model that matches no pattern goes to 'vllm' (default_upstream)." in lines
    assert not [line for line in lines if line.startswith("warning")]


def test_check_shows_passthrough_upstreams_and_warns_about_unreachable_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        '[[upstreams]]\nname = "all"\nurl = "http://127.0.0.1:1"\nnormalize = false\n'
        '[[upstreams]]\nname = "late"\nurl = "http://127.0.0.1:2"\nmodels = ["qwen*"]\n',
    )
    assert main(["check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if line.startswith("1  all")]
    assert row.split()[5:] == ["passthrough", "-"]
    assert "warning: upstream 'late' gets no model by pattern: 'all' comes first" in out
    assert "A request naming no model gets 404 (several upstreams, no default)." in out


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[[upstreams]]\nname = "a"\nurl = "ftp://x"\n', "upstreams[0].url"),
        ('port = "many"\n', "port"),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\napi_key_env = "NOT_SET_ANYWHERE"\n',
            "upstreams[0].api_key_env",
        ),
        ("[timeouts]\nconect = 3\n", "timeouts.conect: unknown key"),
    ],
)
def test_check_exits_2_naming_the_key(
    text: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, text)
    assert main(["check", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("toolcall-proxy: config error: ")
    assert key in captured.err


def test_check_of_a_missing_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--config", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err


# the command line itself ----------------------------------------------------------------


def test_bare_invocation_still_serves_and_lists_the_tools(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = build_parser().parse_args(["--config", "x.toml", "--host", "0.0.0.0", "--port", "9"])
    assert (args.config, args.host, args.port) == (Path("x.toml"), "0.0.0.0", 9)
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"  {name} " in out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_tool_has_its_own_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: toolcall-proxy {name}")


# fix --------------------------------------------------------------------------------------

CAPTURES = sorted(UPSTREAM_FIXTURES.glob("*.sse"))


def meta_for(capture: Path) -> Path | None:
    meta = capture.with_suffix(".meta.json")
    return meta if meta.is_file() else None


def fix(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, bytes, str]:
    status = main(["fix", *argv])
    captured = capsysbinary.readouterr()
    return status, captured.out, captured.err.decode()


def repairs_in(summary: str) -> dict[str, int]:
    rows = summary.splitlines()[2:]  # the headline, then the table's header
    return {kind: int(count) for kind, count in (row.split() for row in rows)}


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_fix_runs_on_every_shipped_capture(
    capture: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    meta = meta_for(capture)
    status, out, err = fix(capsysbinary, str(capture), *(["--request", str(meta)] if meta else []))
    assert status == 0
    assert err.startswith("toolcall-proxy fix: ")
    if out == capture.read_bytes():
        assert err == "toolcall-proxy fix: no repairs: the output is the input, byte for byte\n"
    elif "no repairs" not in err:
        assert sum(repairs_in(err).values()) == int(err.split()[2])
        assert out != capture.read_bytes()


def test_fix_repairs_an_old_llama_cpp_stream_and_names_each_quirk(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    capture = UPSTREAM_FIXTURES / "llamacpp-b5494-one-tool-call.sse"
    status, out, err = fix(capsysbinary, str(capture), "--request", str(meta_for(capture)))
    assert status == 0
    repairs = repairs_in(err)
    assert {"name-repeated", "id-inside-function", "type-missing"} <= set(repairs)
    # Q1: the name came on every delta; after the fix it comes once.
    assert capture.read_bytes().count(b'"name":"get_weather"') == repairs["name-repeated"] + 1
    assert out.count(b'"name":"get_weather"') == 1
    assert out.count(b'"type":"function"') == 1


def test_fix_reads_stdin_and_coalesces_on_request(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = (UPSTREAM_FIXTURES / "llamacpp-b9821-parallel-tool-calls.sse").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(capture)))
    status, out, err = fix(capsysbinary, "-", "--output", "coalesced")
    assert status == 0
    calls = [line for line in out.split(b"\n") if b'"tool_calls":[' in line]
    assert len(calls) == 2, "coalesced: each call whole in one delta"
    arguments = [
        json.loads(
            json.loads(line.removeprefix(b"data: "))["choices"][0]["delta"]["tool_calls"][0][
                "function"
            ]["arguments"]
        )
        for line in calls
    ]
    assert arguments == [{"location": "Tokyo", "unit": "celsius"}, {"timezone": "CET"}]
    assert err.startswith("toolcall-proxy fix: ")


def test_fix_recovers_markup_only_when_the_request_offered_tools(
    capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    text = '<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"Paris\\"}}\\n</tool_call>'
    capture = tmp_path / "hermes.sse"
    capture.write_text(
        'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"'
        + text
        + '"},"finish_reason":null}]}\n\n'
        'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        "data: [DONE]\n\n"
    )
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"model": "m", "messages": [], "tools": [WEATHER_TOOL]}))
    status, out, err = fix(
        capsysbinary, str(capture), "--request", str(request), "--dialects", "hermes"
    )
    assert status == 0
    assert repairs_in(err)["markup-in-content:hermes"] == 1
    assert b'"name":"get_weather"' in out
    assert b"<tool_call>" not in out
    status, out, err = fix(capsysbinary, str(capture), "--dialects", "hermes")
    assert "no repairs" in err
    assert out == capture.read_bytes()


def test_fix_repairs_a_whole_json_completion(
    capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    capture = tmp_path / "completion.json"
    capture.write_text(json.dumps({
        "id": "c", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        ]}}],
    }))  # fmt: skip
    status, out, err = fix(capsysbinary, str(capture))
    assert status == 0
    assert repairs_in(err) == {"arguments-not-a-string": 1}
    [call] = json.loads(out)["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.sse"], "cannot read missing.sse"),
        (
            [
                str(UPSTREAM_FIXTURES / "groq-whole-call.sse"),
                "--request",
                str(UPSTREAM_FIXTURES / "groq-whole-call.sse"),
            ],
            "not JSON",
        ),
        (
            [str(UPSTREAM_FIXTURES / "groq-whole-call.sse"), "--dialects", "klingon"],
            "unknown dialect(s) klingon",
        ),
    ],
)
def test_fix_exits_2_on_bad_input(
    argv: list[str], message: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    status, out, err = fix(capsysbinary, *argv)
    assert status == 2
    assert out == b""
    assert message in err


# probe ------------------------------------------------------------------------------------


def llm_server(
    stream: bytes, *, model: str = "tiny", seen: list[tuple[str, Any, str | None]] | None = None
) -> web.Application:
    """An OpenAI-compatible upstream on 127.0.0.1 that lists ``model`` and replays ``stream``."""

    async def models(request: web.Request) -> web.Response:
        if seen is not None:
            seen.append((request.path, None, request.headers.get("Authorization")))
        return web.json_response({"object": "list", "data": [{"id": model, "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        if seen is not None:
            seen.append((request.path, await request.json(), request.headers.get("Authorization")))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in split_events(stream):
            await response.write(part)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def probe_config(tmp_path: Path, **upstreams: str) -> Path:
    tables = "".join(
        f'[[upstreams]]\nname = "{name}"\nurl = "{url}"\nmodels = ["{name}-*"]\n'
        for name, url in upstreams.items()
    )
    return write(tmp_path, tables)


async def probe(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[list[str]], str]:
    """Run the real CLI in a thread (it runs its own event loop); the table's rows split on 2+ spaces."""
    status = await asyncio.to_thread(main, ["probe", *argv])
    captured = capsys.readouterr()
    rows = [re.split(r"\s{2,}", line) for line in captured.out.splitlines()]
    return status, rows, captured.err


async def test_probe_reports_each_upstreams_quirks_as_a_table(
    start_upstream: StartUpstream,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLD_KEY", "sk-old")
    seen: list[tuple[str, Any, str | None]] = []
    old = await start_upstream(
        llm_server(
            (UPSTREAM_FIXTURES / "llamacpp-b5494-one-tool-call.sse").read_bytes(),
            model="qwen-old",
            seen=seen,
        )
    )
    new = await start_upstream(
        llm_server(
            (UPSTREAM_FIXTURES / "llamacpp-b9821-one-tool-call.sse").read_bytes(), model="qwen-new"
        )
    )
    text = await start_upstream(
        llm_server((UPSTREAM_FIXTURES / "llamacpp-b9821-tools-but-text-answer.sse").read_bytes())
    )
    config = probe_config(
        tmp_path, old=upstream_url(old), new=upstream_url(new), text=upstream_url(text)
    )
    config.write_text(
        config.read_text().replace('name = "old"\n', 'name = "old"\napi_key_env = "OLD_KEY"\n')
    )

    status, rows, _ = await probe(capsys, "--config", str(config))
    assert status == 0
    assert rows[0] == ["UPSTREAM", "MODEL", "RESULT", "TOOL CALLS", "QUIRKS (repairs)"]
    by_name = {row[0]: row for row in rows[1:]}
    assert by_name["old"][1:4] == ["qwen-old", "ok", "1"]
    quirks = {}
    for quirk in by_name["old"][4].split(", "):
        named = re.fullmatch(r"(.+) \((\d+)\)", quirk)
        assert named, quirk
        quirks[named[1]] = named[2]
    assert {"id-inside-function", "name-repeated", "type-missing"} <= set(quirks)
    # issue 25 item 1: the recording's call (made for a tool of "location") misses the probe
    # tool's required "city", which the probe now reports beside the repairs
    assert by_name["new"][1:] == [
        "qwen-new",
        "ok",
        "1",
        "args-in-first-delta (1), args-schema-mismatch:required (1)",
    ]
    assert by_name["text"][1:] == ["tiny", "ok", "0", "none"]

    (models_path, _, models_auth), (chat_path, request, chat_auth) = seen
    assert (models_path, chat_path) == ("/v1/models", "/v1/chat/completions")
    assert models_auth == chat_auth == "Bearer sk-old"
    assert request["model"] == "qwen-old"
    assert request["stream"] is True
    assert [t["function"]["name"] for t in request["tools"]] == ["get_weather"]


async def test_probe_one_named_upstream_with_a_given_model(
    start_upstream: StartUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen_a: list[tuple[str, Any, str | None]] = []
    seen_b: list[tuple[str, Any, str | None]] = []
    stream = (UPSTREAM_FIXTURES / "llamacpp-b9821-one-tool-call.sse").read_bytes()
    a = await start_upstream(llm_server(stream, seen=seen_a))
    b = await start_upstream(llm_server(stream, seen=seen_b))
    config = probe_config(tmp_path, a=upstream_url(a), b=upstream_url(b))
    status, rows, _ = await probe(
        capsys, "--config", str(config), "--upstream", "b", "--model", "chosen"
    )
    assert status == 0
    assert [row[:3] for row in rows[1:]] == [["b", "chosen", "ok"]]
    assert seen_a == []
    [(path, request, _)] = seen_b
    assert (path, request["model"]) == ("/v1/chat/completions", "chosen")


async def test_probe_reports_upstreams_that_give_no_stream_and_exits_1(
    start_upstream: StartUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "tools are not supported"}}, status=500)

    app = web.Application()
    app.router.add_get("/broken/v1/models", models)
    app.router.add_post("/broken/v1/chat/completions", refuse)
    upstream = await start_upstream(app)
    config = probe_config(
        tmp_path, broken=upstream_url(upstream, "/broken"), gone=f"http://127.0.0.1:{free_port()}"
    )
    status, rows, _ = await probe(capsys, "--config", str(config))
    assert status == 1
    by_name = {row[0]: row for row in rows[1:]}
    assert by_name["broken"][1:4] == ["m", "error", "-"]
    assert by_name["broken"][4] == 'status 500: {"error": {"message": "tools are not supported"}}'
    assert by_name["gone"][2:4] == ["error", "-"]
    assert by_name["gone"][4].startswith("unreachable")


async def test_probe_of_an_unknown_upstream_exits_2_listing_the_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = probe_config(tmp_path, a="http://127.0.0.1:1")
    status, rows, err = await probe(capsys, "--config", str(config), "--upstream", "z")
    assert status == 2
    assert rows == []
    assert "no upstream named 'z' (known: a)" in err
