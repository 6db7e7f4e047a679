"""deploy/kubernetes/: valid against the Kubernetes API schemas (offline, the schemas bundled by
kubernetes-validate), and in line with the image as built: its user, port, command, health.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.container.conftest import DEPLOY, Image
from tests.container.podman import run

MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
# The oldest and the newest API versions the package bundles schemas for.
VERSIONS = ("1.25.0", kubernetes_validate.latest_version())


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def proxy_containers(path: Path) -> list[dict[str, Any]]:
    return [
        container
        for doc in documents(path)
        if doc["kind"] == "Deployment"
        for container in doc["spec"]["template"]["spec"]["containers"]
        if container["name"] == "toolcall-proxy"
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_kubernetes_manifests_are_valid_against_the_api_schemas(path: Path, version: str) -> None:
    docs = documents(path)
    assert docs
    for doc in docs:
        # strict: a misspelt or misplaced field is an error, not silently dropped.
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize(
    "damage",
    [
        lambda c: c["livenessProbe"]["httpGet"].update(port=80.5),
        lambda c: c.update(readynessProbe=c.pop("readinessProbe")),
        lambda c: c["securityContext"].update(runAsNonRoot="yes"),
    ],
    ids=["port-not-an-integer", "misspelt-field", "wrong-type"],
)
def test_kubernetes_validation_catches_a_damaged_proxy_container(damage: Any) -> None:
    [deployment] = [d for d in documents(MANIFESTS[0]) if d["kind"] == "Deployment"]
    damaged = copy.deepcopy(deployment)
    [container] = [
        c
        for c in damaged["spec"]["template"]["spec"]["containers"]
        if c["name"] == "toolcall-proxy"
    ]
    damage(container)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(damaged, VERSIONS[-1], strict=True)


def image_inspect(image: Image) -> dict[str, Any]:
    inspected = run(["podman", "image", "inspect", image.tag], within=60)
    [entry] = json.loads(inspected.stdout)
    assert isinstance(entry, dict)
    return entry


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_kubernetes_proxy_container_agrees_with_the_built_image(
    path: Path, proxy_image: Image
) -> None:
    inspected = image_inspect(proxy_image)
    config = inspected["Config"]
    uid, gid = (int(part) for part in config["User"].split(":"))
    [exposed] = config["ExposedPorts"]
    port = int(exposed.removesuffix("/tcp"))
    health = " ".join(inspected["Healthcheck"]["Test"])
    for container in proxy_containers(path):
        assert "command" not in container, "the image's entrypoint runs"
        assert container["args"] == config["Cmd"]
        security = container["securityContext"]
        assert (security["runAsUser"], security["runAsGroup"]) == (uid, gid)
        assert security["runAsNonRoot"] is True
        assert uid != 0
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        for probe in ("livenessProbe", "readinessProbe"):
            assert ports[container[probe]["httpGet"]["port"]] == port
        assert container["livenessProbe"]["httpGet"]["path"] in health
        env = {e["name"] for e in container.get("env", [])}
        assert not env & {"TOOLCALL_PROXY_HOST", "TOOLCALL_PROXY_PORT"}, "the image sets them"
    assert proxy_containers(path)
