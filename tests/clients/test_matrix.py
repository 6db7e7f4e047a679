"""Real client libraries reconstruct every case right through the proxy, in both output forms.

The same clients run against the upstream alone: each case file records which clients its shape
breaks unaided (`wrong_unaided`), and that record is checked too, so a case keeps proving that
the proxy repairs something a real client gets wrong. The few cells where a client's own fault
meets a shape the proxy must keep are listed in limits.toml, and checked to fail only that way.
"""

from __future__ import annotations

import pytest

from tests.clients.cases import Case, load_cases
from tests.clients.drivers import DRIVER_NAMES, DRIVERS, Driver, node_missing_reason
from tests.clients.limits import load_limits, unknown_names
from tests.clients.matrix import Matrix
from tests.clients.proxy_process import ROUTES, ProxyProcess
from tests.clients.replayer import ReplayerThread
from tests.clients.verdicts import judge

CASES = load_cases()
RECORDED = [
    pytest.param(driver, case, id=f"{driver.name}-{case.name}")
    for case in CASES
    if case.wrong_unaided is not None
    for driver in DRIVERS
    if driver.covers(case) and driver.direct
]
THROUGH_PROXY = [
    pytest.param(target, driver, case, id=f"{target}-{driver.name}-{case.name}")
    for target in ROUTES
    for case in CASES
    for driver in DRIVERS
    if driver.covers(case)
]


def _needs_node(driver: Driver) -> None:
    """A Node client that cannot run fails its cells: .ci/check installs what they need."""
    reason = node_missing_reason()
    assert not (driver.node and reason), reason


def test_case_files_name_only_known_clients() -> None:
    for case in CASES:
        unknown = (case.wrong_unaided or frozenset()) - DRIVER_NAMES
        assert not unknown, f"{case.origin.name}: unknown clients {sorted(unknown)}"


def test_limits_name_only_known_cases_and_clients() -> None:
    assert unknown_names((c.name for c in CASES), DRIVER_NAMES) == []


@pytest.mark.parametrize(("driver", "case"), RECORDED)
def test_unaided_client_is_wrong_exactly_where_recorded(
    matrix: Matrix, replayer: ReplayerThread, driver: Driver, case: Case
) -> None:
    _needs_node(driver)
    assert case.wrong_unaided is not None
    verdict = judge(case, matrix.outcome("direct", driver, case, replayer.url))
    if driver.name in case.wrong_unaided:
        assert not verdict.right, (
            f"{driver.name} now gets {case.name} right without the proxy: "
            f"drop it from wrong_unaided in {case.origin.name}"
        )
    else:
        assert verdict.right, "\n".join(verdict.reasons)


@pytest.mark.parametrize(("target", "driver", "case"), THROUGH_PROXY)
def test_client_reconstructs_case_through_proxy(
    matrix: Matrix,
    replayer: ReplayerThread,
    proxy: ProxyProcess,
    target: str,
    driver: Driver,
    case: Case,
) -> None:
    _needs_node(driver)
    verdict = judge(case, matrix.outcome(target, driver, case, proxy.url))
    if case.expect.outcome == "truncated" and driver.direct:
        unaided = judge(case, matrix.outcome("direct", driver, case, replayer.url))
        if not unaided.right:
            # Some clients drop what an early end leaves unfinished (the AI SDK emits a call
            # only when its stream finishes): the proxy must then lose nothing more.
            new_faults = set(verdict.reasons) - set(unaided.reasons)
            assert not new_faults, "\n".join(new_faults)
            return
    limit = load_limits().get((case.name, driver.name, ROUTES[target]))
    if limit is not None:
        assert not verdict.right, (
            f"{driver.name} now gets {case.name} right in the {limit.target} form: "
            "drop its entry from limits.toml"
        )
        stray = limit.stray_reasons(verdict)
        assert not stray, "\n".join(stray)
        return
    assert verdict.right, "\n".join(verdict.reasons)
