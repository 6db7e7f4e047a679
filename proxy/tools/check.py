"""``toolcall-proxy check --config PATH``: validate a config and print the routing it resolves to.

The config is loaded exactly as the server would load it (file, environment, defaults), so a
config that passes here starts. Errors exit with status 2 and name the key (proxy.cli).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from proxy.core.markup import check_names
from proxy.settings import Settings, UpstreamSettings, load_settings, resolve_config_path
from proxy.tools.table import format_table

HELP = "validate a config file and print the resolved routing table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, help="TOML config file (default: config/proxy.toml if it exists)"
    )


def run(args: argparse.Namespace) -> int:
    path = resolve_config_path(args.config)
    settings = load_settings(path)
    print(f"config: {path if path is not None else '(built-in defaults)'}: valid")
    print(f"listens on {settings.host}:{settings.port}, log level {settings.log_level}")
    print()
    print("Routing: a request goes to the first upstream whose MODELS pattern matches its model.")
    print(routing_table(settings))
    print()
    for line in auto_dialects(settings) + fallback_rules(settings):
        print(line)
    for warning in shadowed_upstreams(settings):
        print(f"warning: {warning}")
    return 0


def routing_table(settings: Settings) -> str:
    rows = [
        [
            str(i),
            u.name,
            ", ".join(u.replica_urls()),
            ", ".join(u.models),
            f"${u.api_key_env}" if u.api_key_env is not None else "-",
            _rewriting(u),
            _dialects(u),
        ]
        for i, u in enumerate(settings.upstreams, start=1)
    ]
    headers = ["#", "UPSTREAM", "URL", "MODELS", "API KEY", "OUTPUT", "DIALECTS"]
    return format_table(headers, rows)


def _rewriting(upstream: UpstreamSettings) -> str:
    return upstream.output if upstream.normalize else "passthrough"


def _dialects(upstream: UpstreamSettings) -> str:
    if not upstream.normalize:
        return "-"
    if isinstance(upstream.dialects, list):
        listed = ", ".join(upstream.dialect_names())
    else:
        listed = upstream.dialects  # "auto" is spelled out under the table
    return listed + (" (+reasoning)" if upstream.extract_from_reasoning is True else "")


def auto_dialects(settings: Settings) -> list[str]:
    if not any(u.normalize and u.dialects == "auto" for u in settings.upstreams):
        return []
    return [f"Dialects tried by 'auto': {', '.join(check_names(['auto'])) or '(none)'}."]


def fallback_rules(settings: Settings) -> list[str]:
    """Where requests go that no pattern claims (the rules of proxy.core.routing)."""
    default = settings.default_upstream
    catch_all = _catch_all(settings)
    if catch_all is not None:
        unmatched = f"Every model matches by pattern ({catch_all.name!r} has '*')."
    elif default is not None:
        unmatched = f"A model that matches no pattern goes to {default!r} (default_upstream)."
    else:
        unmatched = "A model that matches no pattern gets 404 (no default_upstream)."
    if default is not None:
        modelless = f"A request naming no model goes to {default!r} (default_upstream)."
    elif len(settings.upstreams) == 1:
        modelless = f"A request naming no model goes to {settings.upstreams[0].name!r}."
    else:
        modelless = "A request naming no model gets 404 (several upstreams, no default)."
    return [unmatched, modelless]


def _catch_all(settings: Settings) -> UpstreamSettings | None:
    return next((u for u in settings.upstreams if "*" in u.models), None)


def shadowed_upstreams(settings: Settings) -> list[str]:
    """Upstreams no model can reach because an earlier one matches every name."""
    catch_all = _catch_all(settings)
    if catch_all is None:
        return []
    later = settings.upstreams[settings.upstreams.index(catch_all) + 1 :]
    return [
        f"upstream {u.name!r} gets no model by pattern: {catch_all.name!r} comes first"
        " and matches every model ('*')"
        for u in later
    ]
