"""The container lane's images, built once per session and removed at its end.

A machine that cannot run podman fails this lane with what to do; it is never skipped. What
the lane measured (base image, build, size, start-up, the lane's own time) is printed at the
end of the test run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.container.base_image import BaseImage, ensure_base_image
from tests.container.podman import ROOT, remove_images, require_podman, run, unique

DEPLOY = ROOT / "deploy"
BUILD_TIMEOUT = 900.0
LANE = "tests/container/"

# The first test of the lane also makes the base image and builds the images, and a cold
# debootstrap takes minutes on a slow mirror: far above the suite's 300 s per test.
LANE_TEST_TIMEOUT = 1800

# What the lane measured, printed by pytest_terminal_summary below.
MEASURED: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Image:
    tag: str
    size_bytes: int
    build_seconds: float


def build(tag: str, base: BaseImage, *args: str) -> Image:
    started = time.monotonic()
    run(
        [
            "podman", "build",
            "--isolation", "chroot",  # the default OCI isolation fails on these cgroups
            "--pull=never",  # the base is the local one, whatever the Dockerfile names
            "--format", "docker",  # keeps HEALTHCHECK, which the OCI format drops
            "--layers=false",  # leaves no intermediate stage behind
            "--build-arg", f"PYTHON_VERSION={base.python_version}",
            "--tag", tag,
            *args,
        ],
        within=BUILD_TIMEOUT,
    )  # fmt: skip
    seconds = time.monotonic() - started
    size = run(["podman", "image", "inspect", "--format", "{{.Size}}", tag], within=60)
    return Image(tag, int(size.stdout), seconds)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(LANE):
            item.add_marker(pytest.mark.timeout(LANE_TEST_TIMEOUT))


@pytest.fixture(scope="session")
def base_image() -> BaseImage:
    require_podman()
    base = ensure_base_image()
    MEASURED["base image"] = f"{base.tag} from {base.made_from} in {base.seconds:.1f} s"
    return base


@pytest.fixture(scope="session")
def proxy_image(base_image: BaseImage) -> Iterator[Image]:
    """deploy/Dockerfile as it is, built from the repository root as its header says."""
    tag = f"localhost/{unique('toolcall-proxy-test')}:latest"
    try:
        image = build(tag, base_image, "--file", str(DEPLOY / "Dockerfile"), str(ROOT))
        MEASURED["proxy image"] = (
            f"built in {image.build_seconds:.1f} s, {image.size_bytes / 1e6:.0f} MB "
            f"(base {base_size_mb(base_image):.0f} MB)"
        )
        yield image
    finally:
        remove_images(tag)


@pytest.fixture(scope="session")
def standin_image(base_image: BaseImage) -> Iterator[Image]:
    """deploy/standin/Dockerfile, the model server's stand-in of the compose override."""
    tag = f"localhost/{unique('toolcall-proxy-standin-test')}:latest"
    try:
        image = build(tag, base_image, str(DEPLOY / "standin"))
        MEASURED["stand-in image"] = f"built in {image.build_seconds:.1f} s"
        yield image
    finally:
        remove_images(tag)


def base_size_mb(base: BaseImage) -> float:
    size = run(["podman", "image", "inspect", "--format", "{{.Size}}", base.tag], within=60)
    return int(size.stdout) / 1e6


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Every phase counts: the images are built in the first test's setup.
    reports = [
        report
        for kind_reports in terminalreporter.stats.values()
        for report in kind_reports
        if isinstance(report, pytest.TestReport) and report.nodeid.startswith(LANE)
    ]
    if not reports:
        return
    terminalreporter.write_sep("-", "container lane (tests/container/)")
    for name, value in MEASURED.items():
        terminalreporter.write_line(f"{name}: {value}")
    lane = sum(report.duration for report in reports)
    terminalreporter.write_line(f"the lane's time: {lane:.1f} s")
