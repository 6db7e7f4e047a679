"""The operator tools behind ``toolcall-proxy COMMAND``: check, fix and probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).parent.parent
SHIPPED_CONFIGS = sorted(ROOT.glob("config/*.toml")) + sorted(ROOT.glob("deploy/config/*.toml"))


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
        assert upstream.url in row
        assert ", ".join(upstream.models) in row


def test_check_prints_the_routing_table_in_match_order_with_the_fallbacks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "x")
    assert main(["check", "--config", str(ROOT / "config/two-upstreams.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("#  UPSTREAM"))
    assert lines[header].split() == [
        "#",
        "UPSTREAM",
        "URL",
        "MODELS",
        "OUTPUT",
        "DIALECTS",
        "API",
        "KEY",
    ]
    llama, vllm = lines[header + 1], lines[header + 2]
    assert llama.split()[:3] == ["1", "llama", "http://127.0.0.1:8080"]
    assert "streamed" in llama
    assert vllm.split()[:3] == ["2", "vllm", "http://127.0.0.1:8000"]
    assert "coalesced" in vllm
    assert "$VLLM_API_KEY" in vllm
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
    assert row.split()[4:6] == ["passthrough", "-"]
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
