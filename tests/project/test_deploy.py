"""deploy/: the container, compose, Kubernetes and systemd files agree with the code they start.

Docker and Kubernetes cannot run here, so each file is parsed and held against the code: the
console script, the CLI's arguments, the config the files mount (loaded by the real
settings loader), the proxy's own endpoints, ports, users and versions.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sys
import tomllib
from configparser import ConfigParser
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml
from yarl import URL

from proxy import __version__
from proxy.cli import build_parser, main
from proxy.settings import Settings, load_settings
from proxy.shell.app import create_app
from proxy.shell.handlers import OWN_PREFIX
from tests.conftest import StartProxy, StartUpstream, port_of
from tests.support.dockerfile import DEPLOY, ROOT, dockerfile_instructions, image_uid, instruction
from tests.support.sockets import free_port
from tests.support.upstreams import models_app

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
[(SCRIPT, SCRIPT_TARGET)] = PYPROJECT["project"]["scripts"].items()
VERSION = __version__
CONFIG_PATH = "/etc/toolcall-proxy/proxy.toml"
PROXY_IMAGE = f"toolcall-proxy:{VERSION}"
# docker-compose.standin.yml overrides docker-compose.yml (tests/container/test_compose.py).
COMPOSE_FILES = sorted(
    p for p in DEPLOY.glob("docker-compose*.yml") if p.name != "docker-compose.standin.yml"
)
K8S_FILES = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
MODEL_SERVER_IMAGES = ("ghcr.io/ggml-org/llama.cpp:server", "vllm/vllm-openai:*")


# Dockerfile -------------------------------------------------------------------------------


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for key, value in dockerfile_instructions():
        if key == "ENV":
            for pair in shlex.split(value):
                name, setting = pair.split("=", 1)
                env[name] = setting
    return env


def image_port() -> int:
    return int(instruction("EXPOSE"))


def test_dockerfile_runs_the_console_script_with_the_mounted_config() -> None:
    assert SCRIPT_TARGET == "proxy.cli:main"
    assert json.loads(instruction("ENTRYPOINT")) == [SCRIPT]
    cmd = json.loads(instruction("CMD"))
    args = build_parser().parse_args(cmd)
    assert str(args.config) == CONFIG_PATH


def test_dockerfile_listens_everywhere_on_the_exposed_port() -> None:
    env = dockerfile_env()
    assert env["TOOLCALL_PROXY_HOST"] == "0.0.0.0"
    assert int(env["TOOLCALL_PROXY_PORT"]) == image_port()
    overrides: dict[str, Any] = {
        k.removeprefix("TOOLCALL_PROXY_").lower(): v
        for k, v in env.items()
        if k.startswith("TOOLCALL_PROXY_")
    }
    settings = Settings(**overrides)
    assert (settings.host, settings.port) == ("0.0.0.0", image_port())


def test_dockerfile_runs_as_a_numeric_non_root_user_it_creates() -> None:
    assert image_uid() > 0
    run = " ".join(v for k, v in dockerfile_instructions() if k == "RUN")
    assert f"--uid {image_uid()}" in run
    assert f"--gid {instruction('USER').split(':')[1]}" in run


def test_dockerfile_python_satisfies_the_package() -> None:
    [default] = re.findall(r"ARG PYTHON_VERSION=(\S+)", (DEPLOY / "Dockerfile").read_text())
    minimum = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, default.split("."))) >= tuple(map(int, minimum.split(".")))


def test_dockerfile_copies_only_what_exists_and_its_ignore_file_lets_through() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    for key, value in dockerfile_instructions():
        if key == "COPY" and not value.startswith("--from"):
            *sources, _ = value.split()
            for source in sources:
                assert (ROOT / source).exists(), source
                assert source.rstrip("/") in allowed, source


async def test_dockerfile_healthcheck_asks_the_proxys_health_endpoint(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    healthcheck = instruction("HEALTHCHECK")
    command = json.loads(healthcheck[healthcheck.index("CMD") + 3 :])
    assert command[:2] == ["python", "-c"]
    assert "/-/health" in command[2]
    proxy = await start_proxy(await start_upstream(models_app()))
    assert await run_python(command[2], port=port_of(proxy.server)) == 0
    assert await run_python(command[2], port=free_port()) != 0


async def run_python(code: str, *, port: int) -> int:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env={"TOOLCALL_PROXY_PORT": str(port)},
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return await asyncio.wait_for(process.wait(), timeout=20)


# The proxy's own endpoints that the files below probe and scrape ---------------------------


def own_routes() -> set[str]:
    app = create_app(Settings())
    paths = {r.canonical for r in app.router.resources()}
    return {p for p in paths if p.startswith(OWN_PREFIX)}


def test_own_endpoints_exist() -> None:
    assert own_routes() == {"/-/health", "/-/ready", "/-/metrics"}


# docker compose ---------------------------------------------------------------------------


def compose(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


COMPOSE_VARIABLE = re.compile(r"\$\{\w+(?::([-?])([^}]*))?\}")


def with_placeholders_filled(value: str) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}: defaults kept, the rest set."""
    return COMPOSE_VARIABLE.sub(lambda m: m.group(2) if m.group(1) == "-" else "set-by-user", value)


def load_mounted(
    path: Path, environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Settings:
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    return load_settings(path)


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.name)
def test_compose_runs_the_image_beside_a_model_server_it_routes_to(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = compose(path)["services"]
    proxy = services.pop("proxy")
    [(model_name, model)] = services.items()
    assert any(fnmatch(model["image"], pattern) for pattern in MODEL_SERVER_IMAGES)
    assert "ports" not in model, "the model server is reached through the proxy only"

    assert proxy["image"] == PROXY_IMAGE
    assert (
        path.parent / proxy["build"]["context"] / proxy["build"]["dockerfile"]
    ).resolve() == DEPLOY / "Dockerfile"
    assert proxy["command"] == json.loads(instruction("CMD"))
    [published] = proxy["ports"]
    assert int(published.split(":")[-1]) == image_port()
    [mount] = proxy["volumes"]
    source, target, mode = mount.split(":")
    assert (target, mode) == (CONFIG_PATH, "ro")
    environment = {
        k: with_placeholders_filled(str(v)) for k, v in proxy.get("environment", {}).items()
    }
    settings = load_mounted(path.parent / source, environment, monkeypatch)

    model_args = [with_placeholders_filled(str(a)) for a in model["command"]]
    model_port = int(model_args[model_args.index("--port") + 1])
    assert [str(model_port)] == model["expose"]
    for upstream in settings.upstreams:
        [url] = map(URL, upstream.replica_urls())
        assert (url.host, url.port) == (model_name, model_port)
    assert set(proxy["depends_on"]) == {model_name}


def test_compose_gives_vllm_and_the_proxy_the_same_key() -> None:
    services = compose(DEPLOY / "docker-compose.vllm.yml")["services"]
    assert (
        services["vllm"]["environment"]["VLLM_API_KEY"]
        == services["proxy"]["environment"]["VLLM_API_KEY"]
    )
    assert "--enable-auto-tool-choice" in services["vllm"]["command"]


def test_compose_starts_llama_server_with_native_tool_calls() -> None:
    llama = compose(DEPLOY / "docker-compose.yml")["services"]["llama"]
    assert "--jinja" in llama["command"]
    assert llama["healthcheck"]["test"][-1].endswith(":8080/health")


# Kubernetes -------------------------------------------------------------------------------


def manifests(path: Path) -> dict[str, list[dict[str, Any]]]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml.safe_load_all(path.read_text()):
        by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


def proxy_container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    [container] = [c for c in containers if c["image"] == PROXY_IMAGE]
    return container


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    [number] = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return int(number)


def container_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "from-a-secret") for e in container.get("env", [])}


def mounted_config(
    by_kind: dict[str, list[dict[str, Any]]], deployment: dict[str, Any], tmp_path: Path
) -> Path:
    """The proxy's --config path followed through its volume mount to the ConfigMap's file."""
    container = proxy_container(deployment)
    config = str(build_parser().parse_args(container["args"]).config)
    assert config == CONFIG_PATH
    [mount] = [m for m in container["volumeMounts"] if config.startswith(m["mountPath"] + "/")]
    [volume] = [
        v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    ]
    [config_map] = [
        c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == volume["configMap"]["name"]
    ]
    path = tmp_path / "proxy.toml"
    path.write_text(config_map["data"][config.removeprefix(mount["mountPath"] + "/")])
    return path


@pytest.mark.parametrize("path", K8S_FILES, ids=lambda p: p.name)
def test_kubernetes_deployment_probes_and_serves_the_proxy(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_kind = manifests(path)
    [deployment] = by_kind["Deployment"]
    [service] = by_kind["Service"]
    template = deployment["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()

    container = proxy_container(deployment)
    assert port_number(container, "proxy") == image_port()
    [service_port] = service["spec"]["ports"]
    assert port_number(container, service_port["targetPort"]) == image_port()
    liveness, readiness = (
        container["livenessProbe"]["httpGet"],
        container["readinessProbe"]["httpGet"],
    )
    assert liveness["path"] == "/-/health"
    assert readiness["path"] == "/-/ready"
    assert {liveness["path"], readiness["path"]} <= own_routes()
    assert (
        port_number(container, liveness["port"])
        == port_number(container, readiness["port"])
        == image_port()
    )
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] in own_routes()
    assert int(annotations["prometheus.io/port"]) == image_port()

    resources = container["resources"]
    assert resources["requests"]["cpu"]
    assert resources["requests"]["memory"]
    assert resources["limits"]["memory"]
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == image_uid()
    assert security["readOnlyRootFilesystem"] is True

    settings = load_mounted(
        mounted_config(by_kind, deployment, tmp_path), container_env(container), monkeypatch
    )
    for upstream in settings.upstreams:
        if upstream.api_key_env is not None:
            assert upstream.api_key_env in container_env(container)


def test_kubernetes_sidecar_routes_to_the_model_server_in_its_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_kind = manifests(DEPLOY / "kubernetes/sidecar.yaml")
    [deployment] = by_kind["Deployment"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    [model] = [c for c in containers if c["image"] != PROXY_IMAGE]
    assert any(fnmatch(model["image"], pattern) for pattern in MODEL_SERVER_IMAGES)
    model_port = int(model["args"][model["args"].index("--port") + 1])
    assert port_number(model, "llama") == model_port
    assert model["startupProbe"]["httpGet"]["path"] == "/health"
    settings = load_mounted(mounted_config(by_kind, deployment, tmp_path), {}, monkeypatch)
    [upstream] = settings.upstreams
    [url] = map(URL, upstream.replica_urls())
    assert (url.host, url.port) == ("127.0.0.1", model_port)
    [service] = by_kind["Service"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["proxy"]


def test_kubernetes_standalone_is_scaled_by_its_autoscaler() -> None:
    by_kind = manifests(DEPLOY / "kubernetes/standalone.yaml")
    [deployment] = by_kind["Deployment"]
    [hpa] = by_kind["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        "apps/v1",
        "Deployment",
        deployment["metadata"]["name"],
    )
    assert 1 < hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert "replicas" not in deployment["spec"], "the autoscaler owns the replica count"
    [metric] = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert proxy_container(deployment)["resources"]["requests"]["cpu"], (
        "utilization needs a request"
    )
    [containers] = [deployment["spec"]["template"]["spec"]["containers"]]
    assert len(containers) == 1


# systemd ----------------------------------------------------------------------------------


def test_systemd_unit_starts_the_console_script_with_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unit = ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((DEPLOY / "systemd/toolcall-proxy.service").read_text())
    service = unit["Service"]
    program, *args = shlex.split(service["ExecStart"])
    assert Path(program).name == SCRIPT
    assert str(build_parser().parse_args(args).config) == CONFIG_PATH
    assert service["DynamicUser"] == "yes"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    # Restarting cannot fix a bad config: the unit stops on the exit status main() gives it.
    bad = tmp_path / "bad.toml"
    bad.write_text("port = -1\n")
    assert service["RestartPreventExitStatus"] == str(main(["--config", str(bad)]))
    assert "port" in capsys.readouterr().err


# The README ------------------------------------------------------------------------------


def test_deploy_readme_documents_every_file() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file() and path.name not in {"README.md"}:
            assert str(path.relative_to(DEPLOY)) in readme, path
