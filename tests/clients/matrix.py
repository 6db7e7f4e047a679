"""Runs every client over every case once per target and renders the client x case table.

Targets: "direct" (the replayer itself: what each client gets unaided) and "S1"/"S2" (through
the proxy, in its streamed and coalesced output forms).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata

from tests.clients.cases import Case
from tests.clients.drivers import (
    DRIVERS,
    NODE_MODULES,
    Driver,
    Outcome,
    Results,
    node_missing_reason,
)
from tests.clients.limits import load_limits
from tests.clients.llamaindex import env as llamaindex_env
from tests.clients.proxy_process import ROUTES
from tests.clients.verdicts import Verdict, judge

TARGETS = ("direct", *ROUTES)


def model_for(target: str) -> Callable[[Case], str]:
    if target == "direct":
        return lambda case: case.name
    return lambda case: f"{ROUTES[target]}/{case.name}"


@dataclass
class Matrix:
    cases: Sequence[Case]
    drivers: Sequence[Driver]
    # target -> driver name -> its results, or why the driver could not run at all
    runs: dict[str, dict[str, Results | Exception]] = field(default_factory=dict)

    def outcome(self, target: str, driver: Driver, case: Case, base_url: str) -> Outcome:
        if target not in self.runs:
            self.runs[target] = self._run(target, base_url)
        results = self.runs[target][driver.name]
        if isinstance(results, Exception):
            raise results
        return results[case.name]

    def _run(self, target: str, base_url: str) -> dict[str, Results | Exception]:
        waits: dict[str, Callable[[], Results] | Exception] = {}
        # The Node drivers start first: their subprocesses run while Python drives.
        for driver in sorted(self.drivers, key=lambda d: not d.node):
            if target == "direct" and not driver.direct:
                continue
            covered = [c for c in self.cases if driver.covers(c)]
            try:
                waits[driver.name] = driver.start(covered, base_url, model_for(target))
            except Exception as exc:
                waits[driver.name] = exc
        runs: dict[str, Results | Exception] = {}
        for name, wait in waits.items():
            try:
                runs[name] = wait if isinstance(wait, Exception) else wait()
            except Exception as exc:
                runs[name] = exc
        return runs

    def verdict(self, target: str, driver: Driver, case: Case) -> Verdict | str:
        """The verdict, or a short word for a cell without one."""
        if not driver.covers(case) or (target == "direct" and not driver.direct):
            return "n/a"
        results = self.runs.get(target, {}).get(driver.name)
        if results is None:
            return "-"
        if isinstance(results, Exception):
            return "FAILED"
        return judge(case, results[case.name])

    def render(self, explain: Sequence[str] = TARGETS) -> str:
        """The table, then why each non-ok cell of the `explain` targets is not ok."""
        lines = [
            "Each cell: direct · S1 · S2 (the client against the upstream alone, then through",
            "the proxy in its streamed and coalesced forms). ok = calls (count, names, ids,",
            "arguments), content and finish_reason as expected; ok* = the same, but the client",
            "also trips over a legal shape the proxy keeps, a limit recorded in",
            "tests/clients/limits.toml (listed below the table); WRONG = the client returned",
            "something else; ERROR = it raised; n/a = the client has no such mode; - = not run.",
            "",
            "| case | " + " | ".join(d.name for d in self.drivers) + " |",
            "|---" * (len(self.drivers) + 1) + "|",
        ]
        notes: list[str] = []
        accepted: list[str] = []
        for case in self.cases:
            cells = []
            for driver in self.drivers:
                labels = []
                for target in TARGETS:
                    verdict = self.verdict(target, driver, case)
                    if isinstance(verdict, str):
                        labels.append(verdict)
                        continue
                    limit = load_limits().get((case.name, driver.name, ROUTES.get(target, "")))
                    if limit is not None and limit.excuses(verdict):
                        labels.append("ok*")
                        accepted.append(f"- {case.name}, {driver.name}, {target}: {limit.why}")
                        continue
                    labels.append(verdict.label)
                    if not verdict.right and target in explain:
                        why = " ".join("; ".join(verdict.reasons).split())
                        notes.append(f"- {case.name}, {driver.name}, {target}: {why}"[:300])
                cells.append(" · ".join(labels))
            lines.append(f"| {case.name} | " + " | ".join(cells) + " |")
        if accepted:
            lines += ["", "ok*: client limits accepted through the proxy (limits.toml):", ""]
            lines += accepted
        if notes:
            lines += ["", f"What the clients got wrong ({', '.join(explain)}):", "", *notes]
        lines += ["", "Clients: " + "; ".join(versions())]
        if reason := node_missing_reason():
            lines.append(f"Not run: {reason}")
        return "\n".join(lines) + "\n"


def versions() -> list[str]:
    python_packages = (
        "openai",
        "langchain-openai",
        "langchain-core",
        "pydantic-ai-slim",
        "litellm",
    )
    found = [f"{p} {metadata.version(p)}" for p in python_packages]
    found.append(llamaindex_env.described())
    for alias in (
        "openai",
        "ai",
        "@ai-sdk/openai-compatible",
        "ai-legacy",
        "openai-compatible-legacy",
    ):
        manifest = NODE_MODULES / alias / "package.json"
        if manifest.is_file():
            package = json.loads(manifest.read_text())
            as_alias = "" if alias == package["name"] else f", as {alias}"
            found.append(f"{package['name']} {package['version']} (node{as_alias})")
    return found


def new_matrix(cases: Sequence[Case]) -> Matrix:
    """The matrix of every driver that can run here (the Node ones need node)."""
    without_node = node_missing_reason() is not None
    return Matrix(cases, [d for d in DRIVERS if not (d.node and without_node)])
