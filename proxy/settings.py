"""Configuration: one pydantic-settings schema, fed by a TOML file and environment variables.

Precedence, highest first: command-line flags, environment (``TOOLCALL_PROXY_*``, nested keys
joined by ``__``, e.g. ``TOOLCALL_PROXY_TIMEOUTS__CONNECT=5``), the TOML file, the defaults.
Unknown keys are errors, so a typo stops the start instead of being silently ignored; every
error names the key (``upstreams[1].url``) or the file line.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from yarl import URL

from proxy.core.errors import ConfigError
from proxy.core.forwarding import Forwarding
from proxy.core.markup import check_names
from proxy.core.policy import ProtocolMode
from proxy.core.protocols.registry import translated_protocols
from proxy.core.request_limits import MAX_JSON_DEPTH
from proxy.core.request_repairs.needs import FAMILIES, TemplateNeeds

ENV_PREFIX = "TOOLCALL_PROXY_"
DEFAULT_PORT = 8090
DEFAULT_CONFIG_PATH = Path("config/proxy.toml")


#: the per-upstream keys that pick a protocol's mode: the names of the protocols with one
MODE_KEYS: tuple[str, ...] = tuple(p.name for p in translated_protocols())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpstreamSettings(_Strict):
    name: str = Field(min_length=1)
    # One server (url), or several replicas of one model (urls: issue 28; one of the two):
    # balanced per worker by least outstanding requests, a conversation kept on one replica
    # under affinity = "auto", failed replicas ejected for a back-off that doubles from
    # eject_seconds to max_eject_seconds, and a request that failed before any byte reached
    # the client sent again elsewhere, at most `retries` times (proxy/core/replicas.py,
    # proxy/shell/upstream.py). Unset retries: 1 with replicas, 0 with one url.
    url: str | None = None
    urls: list[str] | None = Field(None, min_length=1)
    affinity: Literal["auto", "none"] = "auto"
    retries: int | None = Field(None, ge=0, le=10)
    eject_seconds: float = Field(5.0, gt=0)
    max_eject_seconds: float = Field(120.0, gt=0)
    # active health: GET <replica><health_path> every health_interval seconds (llama-server's
    # and vLLM's /health); unset: passive health only
    health_path: str | None = None
    health_interval: float = Field(5.0, gt=0)
    models: list[str] = Field(default_factory=lambda: ["*"])
    api_key_env: str | None = None
    normalize: bool = True
    output: Literal["streamed", "coalesced"] = "streamed"
    dialects: Literal["auto", "none"] | list[str] = "auto"
    # true: every dialect also in reasoning text; "auto": the dialects whose models write
    # their calls there (proxy.core.markup.reasoning_names)
    extract_from_reasoning: bool | Literal["auto"] = "auto"
    dedupe_calls: bool = False
    # the field chat clients get reasoning in (issue 24 item 11): as the upstream sent it, or
    # always the one named (the AI SDK and OpenCode read reasoning_content)
    reasoning_field: Literal["keep", "reasoning_content", "reasoning"] = "keep"
    # a leading <think>...</think> in a chat answer's content is reasoning (issue 24 item 11)
    think_in_content: bool = False
    max_concurrent_requests: int | None = Field(
        None, ge=1
    )  # above it: 429, see proxy/shell/limits.py
    # How clients of each protocol with a translate mode (proxy/core/protocols/registry.py;
    # the key is the protocol's name) are served (proxy/core/policy.py): "translate" over the
    # upstream's chat completions (the default), or "native", the upstream's own endpoint,
    # repaired in place. Unset with normalize = false: passthrough. The only place a protocol
    # is named here: the validator and ``protocol_modes`` take the names from the registry,
    # and a protocol registered without its field here stops the import (below the class).
    responses: ProtocolMode | None = None
    messages: ProtocolMode | None = None
    # The request body sent upstream, for every protocol (proxy/core/forwarding.py): the
    # client's model name or a glob -> the upstream's name; a cap on the token limits asked.
    model_map: dict[str, str] = Field(default_factory=dict)
    max_tokens_limit: int | None = Field(None, ge=1)
    # Chat clients' requests reshaped so that the model's chat template takes them
    # (docs/repairs.md, "What it repairs in requests"): "auto" changes only shapes known to
    # break a template, "off" forwards every chat request untouched. Translated requests are
    # always repaired (the proxy builds them).
    request_repairs: Literal["auto", "off"] = "auto"
    # The upstream's template family, for what only some templates need: "auto" reads the
    # template from llama-server's GET /props; a family name for servers that do not show it.
    template: str = "auto"
    # A call's arguments against its tool's schema (proxy/core/arguments/, issue 25): healed
    # from almost-JSON, coerced ("5" for 5), both only into arguments that fit and never on a
    # call a token limit cut; and a request's parallel_tool_calls: false held to (the calls
    # after the first dropped), unless turned off for an upstream that is trusted with it.
    heal_arguments: bool = False
    coerce_arguments: bool = False
    enforce_parallel_tool_calls: bool = True
    # llama-server's "Failed to parse input at pos N: <the model's text>" (a 500, or an error
    # inside the stream) answered with the calls that text holds, when it holds complete
    # blocks of a known dialect (proxy/core/parse_failure.py, issue 24 item 8)
    recover_parse_failures: bool = True

    @field_validator("heal_arguments", "coerce_arguments")
    @classmethod
    def _repairs_need_normalize(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("normalize") is False:
            raise ValueError(
                "cannot be true when normalize = false (that upstream's answers pass through"
                " untouched); remove one of the two"
            )
        return value

    @field_validator(*MODE_KEYS)
    @classmethod
    def _needs_normalize(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("normalize") is False:
            raise ValueError(
                f"cannot be set when normalize = false (that upstream's /v1/{info.field_name}"
                " requests pass through untouched); remove one of the two"
            )
        return value

    def protocol_modes(self) -> dict[str, ProtocolMode]:
        """The mode of each client protocol; unset ones translate."""
        modes = {name: getattr(self, name) for name in MODE_KEYS}
        return {name: mode for name, mode in modes.items() if mode is not None}

    @field_validator("url")
    @classmethod
    def _http_origin(cls, value: str | None) -> str | None:
        return None if value is None else _origin(value)

    @field_validator("urls")
    @classmethod
    def _http_origins(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        origins = [_origin(url) for url in value]
        for i, url in enumerate(origins):
            if url in origins[:i]:
                raise ValueError(f"{url!r} is listed twice")
        return origins

    @field_validator("health_path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"must be a path starting with '/', got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_way_to_the_server(self) -> UpstreamSettings:
        if self.url is not None and self.urls is not None:
            raise ValueError("url, urls: both are set; set url for one server or urls for replicas")
        if self.url is None and self.urls is None:
            raise ValueError("url: missing; set url (one server) or urls (replicas)")
        if self.max_eject_seconds < self.eject_seconds:
            raise ValueError("max_eject_seconds: must not be below eject_seconds")
        return self

    def replica_urls(self) -> tuple[str, ...]:
        """The server's URL, or each replica's."""
        return tuple(self.urls) if self.urls is not None else (self.url or "",)

    def retry_count(self) -> int:
        """How many times a request that failed before its first byte is sent again."""
        if self.retries is not None:
            return self.retries
        return 1 if self.urls is not None and len(self.urls) > 1 else 0

    @field_validator("model_map")
    @classmethod
    def _model_names(cls, value: dict[str, str]) -> dict[str, str]:
        for pattern, target in value.items():
            if not pattern or not target:
                raise ValueError("model names and patterns must not be empty")
        return value

    @field_validator("template")
    @classmethod
    def _known_family(cls, value: str) -> str:
        if value != "auto" and value not in FAMILIES:
            raise ValueError(
                f"unknown template family {value!r}; known: auto, {', '.join(FAMILIES)}"
            )
        return value

    def template_needs(self) -> TemplateNeeds | None:
        """The needs the setting names; None: read them from the upstream (``"auto"``)."""
        return None if self.template == "auto" else FAMILIES[self.template]

    def forwarding(self) -> Forwarding:
        return Forwarding(self.model_map, self.max_tokens_limit)

    @field_validator("models")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern:
                raise ValueError("model patterns must not be empty")
            fnmatch.translate(pattern)
        return value

    @field_validator("dialects")
    @classmethod
    def _known_dialects(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            check_names(value)
        return value

    def dialect_names(self) -> tuple[str, ...]:
        if self.dialects == "none":
            return ()
        return check_names(["auto"] if self.dialects == "auto" else self.dialects)

    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env)


def _origin(value: str) -> str:
    url = URL(value)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"must be an http(s) URL with a host, got {value!r}")
    if url.query_string or url.fragment or url.user or url.password:
        raise ValueError("must not carry a query, fragment or credentials")
    return value.rstrip("/")


def _check_mode_fields() -> None:
    """Every protocol with a translate mode has its mode setting (a field is the schema the
    TOML is checked against, so it is declared above, not made here)."""
    missing = [key for key in MODE_KEYS if key not in UpstreamSettings.model_fields]
    if missing:
        raise ConfigError(
            "proxy/settings.py: UpstreamSettings has no mode setting for the registered"
            f" protocol(s) {', '.join(missing)}; add `{missing[0]}: ProtocolMode | None = None`"
        )


_check_mode_fields()


class TimeoutSettings(_Strict):
    connect: float = Field(10.0, gt=0)
    first_byte: float = Field(600.0, gt=0)  # prompt processing of a long context can take minutes
    idle: float = Field(300.0, gt=0)
    client_write: float = Field(300.0, gt=0)  # a client reading nothing this long is dropped
    # From a connection's start (or its previous response's end) to the end of the next
    # request's headers; also how long an idle keep-alive connection stays open.
    request_headers: float = Field(75.0, gt=0)
    # A body the proxy reads (JSON, for routing) must arrive whole this long after its headers.
    request_body: float = Field(60.0, gt=0)
    # On SIGTERM, open streams may run this long; under Kubernetes' default 30 s before SIGKILL.
    shutdown_grace: float = Field(25.0, ge=0)


class LimitSettings(_Strict):
    max_event_bytes: int = Field(1 << 20, ge=1024)
    max_held_bytes: int = Field(1 << 20, ge=1024)
    max_request_body_bytes: int = Field(64 << 20, ge=1024)
    max_response_body_bytes: int = Field(64 << 20, ge=1024)
    max_header_bytes: int = Field(8190, ge=1024)  # the request line and each header line
    # A request body the proxy works on (translated, native, count_tokens, or rewritten by
    # model_map / max_tokens_limit): how deep it may nest, and how many tools it may offer
    # (proxy/core/request_limits.py); 400 past either.
    max_json_depth: int = Field(128, ge=1, le=MAX_JSON_DEPTH)
    max_tools: int = Field(1024, ge=1)


class AuthSettings(_Strict):
    """Bearer keys a client must present; none configured means no inbound authentication."""

    api_keys_env: str | None = None  # an environment variable holding keys, comma-separated
    api_keys_file: Path | None = None  # one key per line; blank lines and "#" comments skipped

    @property
    def enabled(self) -> bool:
        return self.api_keys_env is not None or self.api_keys_file is not None

    def client_keys(self) -> tuple[str, ...]:
        """Every accepted key. Raises ValueError naming the key at fault when one is unusable."""
        keys: list[str] = []
        if self.api_keys_env is not None:
            value = os.environ.get(self.api_keys_env, "")
            keys += [k for k in value.replace(",", " ").split() if k]
            if not keys:
                raise ValueError(
                    f"auth.api_keys_env: environment variable {self.api_keys_env} is not set"
                    " or holds no key"
                )
        if self.api_keys_file is not None:
            try:
                lines = self.api_keys_file.read_text().splitlines()
            except OSError as exc:
                raise ValueError(
                    f"auth.api_keys_file: cannot read {self.api_keys_file}: {exc.strerror or exc}"
                ) from exc
            from_file = [k.strip() for k in lines if k.strip() and not k.strip().startswith("#")]
            if not from_file:
                raise ValueError(f"auth.api_keys_file: {self.api_keys_file} holds no key")
            if any(len(k.split()) != 1 for k in from_file):
                raise ValueError(f"auth.api_keys_file: a key in {self.api_keys_file} has spaces")
            keys += from_file
        return tuple(keys)


class ForwardedSettings(_Strict):
    """X-Forwarded-For / X-Forwarded-Proto on requests to upstreams."""

    add: bool = True  # add the client's address and scheme
    # Keep the client's own X-Forwarded-* (appending to X-Forwarded-For) only when every client
    # is a trusted proxy; otherwise they are removed, since any client can forge them.
    trust_incoming: bool = False


def _default_upstreams() -> list[UpstreamSettings]:
    return [UpstreamSettings(name="default", url="http://127.0.0.1:8080")]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # Processes serving the one listening socket (proxy/shell/supervisor.py); 1 serves in this
    # process, as before workers existed.
    workers: int = Field(1, ge=1, le=256)
    upstreams: list[UpstreamSettings] = Field(default_factory=_default_upstreams, min_length=1)
    default_upstream: str | None = None
    timeouts: TimeoutSettings = TimeoutSettings()
    limits: LimitSettings = LimitSettings()
    auth: AuthSettings = AuthSettings()
    forwarded: ForwardedSettings = ForwardedSettings()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        names = [u.name for u in self.upstreams]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"upstreams[{i}].name: duplicate upstream name {name!r}")
        if self.default_upstream is not None and self.default_upstream not in names:
            raise ValueError(
                f"default_upstream: {self.default_upstream!r} is not an upstream name"
                f" (known: {', '.join(names)})"
            )
        for i, upstream in enumerate(self.upstreams):
            if upstream.api_key_env is not None and upstream.api_key() is None:
                raise ValueError(
                    f"upstreams[{i}].api_key_env: environment variable"
                    f" {upstream.api_key_env} is not set"
                )
        self.auth.client_keys()  # an unusable key source stops the start
        return self


class _DictSource(PydanticBaseSettingsSource):
    """The already-parsed TOML file, below the environment in precedence."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


def resolve_config_path(given: Path | None) -> Path | None:
    """The file to read: the one given, else the default path when it exists, else none."""
    if given is not None:
        return given
    return DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.is_file() else None


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from a file (if any), the environment and explicit overrides."""
    file_data = read_toml(path) if path is not None else {}

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, env_settings, _DictSource(settings_cls, file_data)

    where = f"{path}: " if path is not None else ""
    try:
        return _Loaded(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(where + describe_validation_error(exc)) from exc


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        parts.append(f"{key}: {message}" if key else message)
    return "; ".join(parts)
