"""Configuration: files, environment, defaults, and start-up errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy import settings as settings_module
from proxy.cli import main
from proxy.core.errors import ConfigError
from proxy.settings import DEFAULT_PORT, UpstreamSettings, load_settings

CONFIG_DIR = Path(__file__).parent.parent / "config"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(text)
    return path


def test_defaults_listen_locally_and_route_to_llama_server(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(None)
    assert (settings.host, settings.port) == ("127.0.0.1", DEFAULT_PORT)
    [upstream] = settings.upstreams
    assert upstream.url == "http://127.0.0.1:8080"
    assert upstream.models == ["*"]


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_configs_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "x")
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "x")
    settings = load_settings(path)
    assert settings.upstreams


def test_file_values_and_environment_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(
        tmp_path,
        'port = 9000\n[timeouts]\nconnect = 3\n[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:1/p/"\nmodels = ["x*"]\n',
    )
    monkeypatch.setenv("TOOLCALL_PROXY_PORT", "9100")
    monkeypatch.setenv("TOOLCALL_PROXY_TIMEOUTS__IDLE", "7")
    settings = load_settings(path)
    assert settings.port == 9100
    assert settings.timeouts.connect == 3
    assert settings.timeouts.idle == 7
    assert settings.upstreams[0].url == "http://127.0.0.1:1/p"
    assert load_settings(path, port=9200).port == 9200


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nmodles = ["*"]\n',
            r"upstreams\[0\]\.modles: unknown key",
        ),
        ("lisen = 1\n", r"lisen: unknown key"),
        (
            '[[upstreams]]\nname = "a"\nurl = "ftp://x"\n',
            r"upstreams\[0\]\.url: must be an http\(s\) URL",
        ),
        ('[[upstreams]]\nname = "a"\nurl = "not a url"\n', r"upstreams\[0\]\.url"),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\n[[upstreams]]\nname = "a"\nurl = "http://y"\n',
            r"upstreams\[1\]\.name: duplicate upstream name 'a'",
        ),
        (
            'default_upstream = "b"\n[[upstreams]]\nname = "a"\nurl = "http://x"\n',
            r"default_upstream: 'b'",
        ),
        ("[timeouts]\nconnect = -1\n", r"timeouts\.connect"),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\napi_key_env = "NO_SUCH_VAR_X"\n',
            r"upstreams\[0\]\.api_key_env: .*NO_SUCH_VAR_X",
        ),
        ("port = \n", r"invalid TOML: .*line 1"),
        ("[timeouts]\nshutdown_grace = -1\n", r"timeouts\.shutdown_grace"),
        ("[timeouts]\nclient_write = 0\n", r"timeouts\.client_write"),
        ("[limits]\nmax_header_bytes = 100\n", r"limits\.max_header_bytes"),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nmax_concurrent_requests = 0\n',
            r"upstreams\[0\]\.max_concurrent_requests",
        ),
        ('[auth]\napi_keys = "sk-in-the-file"\n', r"auth\.api_keys: unknown key"),
        ('[auth]\napi_keys_env = "NO_SUCH_KEYS_VAR"\n', r"auth\.api_keys_env: .*NO_SUCH_KEYS_VAR"),
        ("[forwarded]\ntrust = true\n", r"forwarded\.trust: unknown key"),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nnormalize = false\nresponses = "native"\n',
            r"upstreams\[0\]\.responses: .*normalize = false",
        ),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nnormalize = false\nmessages = "translate"\n',
            r"upstreams\[0\]\.messages: .*normalize = false",
        ),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nmessages = "bridge"\n',
            r"upstreams\[0\]\.messages",
        ),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\ntemplate = "mistal"\n',
            r"upstreams\[0\]\.template: unknown template family 'mistal'; known: auto, generic",
        ),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nrequest_repairs = true\n',
            r"upstreams\[0\]\.request_repairs",
        ),
        # issue 25: healing and coercion change answers, which normalize = false never does
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nnormalize = false\nheal_arguments = true\n',
            r"upstreams\[0\]\.heal_arguments: .*normalize = false",
        ),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nnormalize = false\ncoerce_arguments = true\n',
            r"upstreams\[0\]\.coerce_arguments: .*normalize = false",
        ),
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nheal_arguments = "sometimes"\n',
            r"upstreams\[0\]\.heal_arguments",
        ),
        # issue 24 item 11
        (
            '[[upstreams]]\nname = "a"\nurl = "http://x"\nreasoning_field = "both"\n',
            r"upstreams\[0\]\.reasoning_field",
        ),
    ],
)
def test_invalid_config_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'name = "a"\nurl = "http://x"\nurls = ["http://y"]\n',
            r"upstreams\[0\]: url, urls: both are set",
        ),
        ('name = "a"\n', r"upstreams\[0\]: url: missing; set url .* or urls"),
        ('name = "a"\nurls = []\n', r"upstreams\[0\]\.urls: List should have at least 1"),
        ('name = "a"\nurls = ["http://y", "ftp://z"]\n', r"upstreams\[0\]\.urls: must be an http"),
        (
            'name = "a"\nurls = ["http://y", "http://y/"]\n',
            r"upstreams\[0\]\.urls: 'http://y' is listed twice",
        ),
        ('name = "a"\nurl = "http://x"\naffinity = "sticky"\n', r"upstreams\[0\]\.affinity"),
        ('name = "a"\nurl = "http://x"\nretries = -1\n', r"upstreams\[0\]\.retries"),
        (
            'name = "a"\nurl = "http://x"\nhealth_path = "health"\n',
            r"upstreams\[0\]\.health_path: must be a path",
        ),
        ('name = "a"\nurl = "http://x"\nhealth_interval = 0\n', r"upstreams\[0\]\.health_interval"),
        (
            'name = "a"\nurl = "http://x"\neject_seconds = 10\nmax_eject_seconds = 5\n',
            r"upstreams\[0\]: max_eject_seconds: must not be below eject_seconds",
        ),
    ],
)
def test_invalid_replica_settings_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "[[upstreams]]\n" + text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


def test_retries_default_to_one_with_replicas_and_none_with_one_url() -> None:
    one = UpstreamSettings(name="a", url="http://x")
    several = UpstreamSettings(name="a", urls=["http://x", "http://y/"])
    assert (one.retry_count(), several.retry_count()) == (0, 1)
    assert several.replica_urls() == ("http://x", "http://y")
    assert UpstreamSettings(name="a", url="http://x", retries=2).retry_count() == 2


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "missing.toml")


def test_cli_exits_2_with_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, '[[upstreams]]\nname = "a"\nurl = "http://x"\nmodels = 3\n')
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolcall-proxy: config error: ")
    assert "upstreams[0].models" in err
    assert err.count("\n") == 1


def test_every_protocol_with_a_translate_mode_has_its_mode_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mode keys come from the registry (issue 27): both are settings, and a protocol
    registered without its field stops the import with a message naming it."""
    assert settings_module.MODE_KEYS == ("responses", "messages")
    assert set(settings_module.MODE_KEYS) <= set(settings_module.UpstreamSettings.model_fields)
    monkeypatch.setattr(settings_module, "MODE_KEYS", ("responses", "ollama"))
    with pytest.raises(ConfigError, match=r"mode setting for the registered protocol\(s\) ollama"):
        settings_module._check_mode_fields()
