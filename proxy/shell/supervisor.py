"""``workers`` > 1: one supervisor process, N worker processes, one listening socket.

The supervisor binds the socket once (so ``port = 0`` picks one port that every worker
shares), creates a private runtime directory for the workers' metrics sockets, and forks the
workers (:mod:`proxy.shell.worker`); the kernel hands each new connection to whichever worker
accepts it first. The supervisor itself serves nothing and runs no event loop: it waits for
signals on a self-pipe, which keeps the fork safe (no threads, no loop to inherit).

* SIGTERM or SIGINT: it closes its own copy of the socket, sends SIGTERM to every worker (and
  closes their lifeline pipe, for a worker not yet listening for signals), and waits for them
  to drain (each lets its open responses run up to ``timeouts.shutdown_grace``).
  A worker still running ``KILL_MARGIN`` seconds after that is killed. It exits 0 when every
  worker exited 0, else 1.
* SIGHUP: the configuration is loaded again (proxy.shell.hangup). Invalid: one line naming the
  key, nothing changes. Valid: a new generation of workers starts with it on the same socket;
  once every one of them serves (each writes its pid to the ready pipe), the old ones get
  SIGTERM and drain as on a stop (up to their ``timeouts.shutdown_grace``, killed
  ``KILL_MARGIN`` seconds after it), and are not started again. The reload's result is
  counted in the supervisor's own file of counts (``supervisor.om``, merged into
  ``/-/metrics`` by proxy.shell.fleet_metrics). The workers ignore SIGHUP (a hangup of the
  terminal reaches the whole process group).
* A worker that exits otherwise (a crash, the OOM killer, ``kill -9``) is logged and started
  again in the same slot (same number, same metrics socket). One that dies within
  ``QUICK_DEATH`` seconds of its start waits before the next start, twice as long each time
  (``FIRST_BACKOFF`` up to ``MAX_BACKOFF``), so a crash loop does not spin.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from typing import Final, NoReturn

from prometheus_client import CollectorRegistry, Counter
from yarl import URL

from proxy.core.errors import ConfigError
from proxy.settings import Settings
from proxy.shell import hangup
from proxy.shell.app_state import config_digest
from proxy.shell.fleet_metrics import FINAL, Fleet, exposition, write_whole
from proxy.shell.limits import LISTEN_BACKLOG
from proxy.shell.worker import run_worker

log = logging.getLogger("toolcall_proxy.supervisor")

QUICK_DEATH: Final = 10.0
FIRST_BACKOFF: Final = 0.5
MAX_BACKOFF: Final = 30.0
KILL_MARGIN: Final = 10.0
STOP_SIGNALS: Final = frozenset({signal.SIGTERM, signal.SIGINT})
WATCHED: Final = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def supervise(
    settings: Settings, new_loop: LoopFactory, reload: hangup.Loader | None = None
) -> int:
    """Serve with ``settings.workers`` processes until SIGTERM/SIGINT; the exit status.
    ``reload``: the settings loaded again on SIGHUP (default: as they are)."""
    if not hasattr(os, "fork"):
        raise ConfigError("workers: more than one worker needs os.fork (Linux, macOS, BSD)")
    sock = listening_socket(settings.host, settings.port)
    runtime_dir = runtime_directory()
    try:
        loader = reload if reload is not None else lambda: settings
        return Supervisor(settings, sock, runtime_dir, new_loop, loader).run()
    finally:
        sock.close()
        shutil.rmtree(runtime_dir, ignore_errors=True)


#: a unix socket's path must fit ``sun_path`` (108 bytes on Linux, 104 on the BSDs and macOS,
#: with its NUL); room is kept for the longest name a worker's socket takes after many reloads
SOCKET_PATH_MAX: Final = 103
SOCKET_NAME_ROOM: Final = len("/worker-999999-999.sock")


def runtime_directory() -> Path:
    """The workers' private directory (mode 0700), in ``TMPDIR`` when its sockets' paths fit
    there, else in the system's /tmp: a deep ``TMPDIR`` (a CI runner's, a test's) would
    otherwise stop every worker at start with ``AF_UNIX path too long``."""
    made = Path(tempfile.mkdtemp(prefix="toolcall-proxy-"))
    if len(os.fsencode(made)) + SOCKET_NAME_ROOM <= SOCKET_PATH_MAX:
        return made
    made.rmdir()
    return Path(tempfile.mkdtemp(prefix="toolcall-proxy-", dir="/tmp"))


def listening_socket(host: str, port: int) -> socket.socket:
    """The bound, listening socket; a port in use or a host that is not this machine's is a
    ConfigError (one line, exit status 2), not a traceback."""
    try:
        family, *_ = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        return socket.create_server((host, port), family=family, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        raise ConfigError(
            f"host, port: cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None


@dataclass(slots=True)
class _Slot:
    worker: int  # 1..N, the access log's "worker" field
    generation: int  # 1, then one more for each reload
    settings: Settings  # what its worker serves (the generation's)
    pid: int | None = None
    started_at: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    ready: bool = False  # its worker serves (it wrote its pid to the ready pipe)
    retire_by: float | None = None  # retired by a reload: killed if still running then

    @property
    def name(self) -> str:
        return f"worker-{self.generation}-{self.worker}"


def _ignore(signum: int, frame: object) -> None:
    """Wakes the select() through the wakeup fd; the signal is read from the pipe."""


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        sock: socket.socket,
        runtime_dir: Path,
        new_loop: LoopFactory,
        reload: hangup.Loader,
    ) -> None:
        self._settings = settings
        self._sock = sock
        self._runtime_dir = runtime_dir
        self._new_loop = new_loop
        self._reload_settings = reload
        self._generation = 1
        self._slots = self._generation_slots()
        self._pending: list[_Slot] = []  # a reload's workers, until they all serve
        self._retiring: list[_Slot] = []  # a reload's old workers, draining
        self._registry = CollectorRegistry()
        self._reloads = Counter(
            "toolcall_proxy_config_reloads",
            "Configuration reloads on SIGHUP, by result.",
            ["result"],
            registry=self._registry,
        )
        self._ready_r, self._ready_w = os.pipe()  # workers write their pid once they serve
        self._wake_r, self._wake_w = os.pipe()
        # Workers hold the read end; it reads end of file when the supervisor is gone.
        self._lifeline_r, self._lifeline_w = os.pipe()
        self._stop_deadline: float | None = None
        self._clean = True

    def run(self) -> int:
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._ready_r, False)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        for signum in WATCHED:
            signal.signal(signum, _ignore)
        for slot in self._slots:
            self._start(slot)
        host, port = self._sock.getsockname()[:2]
        # The single process's start-up line (aiohttp's), once, with the port actually bound.
        log.info(
            "======== Running on %s ========\n(Press CTRL+C to quit)",
            URL.build(scheme="http", host=host, port=port),
        )
        while True:
            readable, _, _ = select.select([self._wake_r, self._ready_r], [], [], self._timeout())
            if self._ready_r in readable:
                self._read_ready()
            signals = self._signals()
            if signals & STOP_SIGNALS and self._stop_deadline is None:
                self._begin_stop()
            if signal.SIGHUP in signals and self._stop_deadline is None:
                self._reload()
            self._reap()
            if self._stop_deadline is None:
                self._restart_due()
                self._promote()
                self._kill_late_retirees()
            elif all(slot.pid is None for slot in self._all()):
                return 0 if self._clean else 1
            elif monotonic() >= self._stop_deadline:
                self._kill_stragglers()

    def _all(self) -> list[_Slot]:
        return self._slots + self._pending + self._retiring

    def _generation_slots(self) -> list[_Slot]:
        count = self._settings.workers
        return [_Slot(n, self._generation, self._settings) for n in range(1, count + 1)]

    def _timeout(self) -> float | None:
        if self._stop_deadline is not None:
            return max(0.0, self._stop_deadline - monotonic())
        due = [s.restart_at for s in self._all() if s.restart_at is not None]
        due += [s.retire_by for s in self._retiring if s.retire_by is not None]
        return max(0.0, min(due) - monotonic()) if due else None

    # -- reload (proxy.shell.hangup)

    def _reload(self) -> None:
        settings = hangup.load(self._reload_settings, self._settings, hangup.RESTART_KEYS)
        if settings is None:
            self._count(hangup.INVALID)
            return
        self._count(hangup.APPLIED)
        self._settings = settings
        for slot in self._pending:  # a later reload supersedes one still starting
            self._retire(slot)
        self._generation += 1
        self._pending = self._generation_slots()
        log.info(
            "reload: starting %d workers with the new configuration (hash %s)",
            len(self._pending),
            config_digest(settings),
        )
        for slot in self._pending:
            self._start(slot)

    def _count(self, result: str) -> None:
        self._reloads.labels(result).inc()
        write_whole(self._runtime_dir / f"supervisor{FINAL}", exposition(self._registry))

    def _read_ready(self) -> None:
        try:
            pids = {int(line) for line in os.read(self._ready_r, 4096).split()}
        except BlockingIOError:
            return
        for slot in self._all():
            if slot.pid in pids:
                slot.ready = True

    def _promote(self) -> None:
        """The reload's workers all serve: they take over, the old ones drain."""
        if not self._pending or not all(slot.ready for slot in self._pending):
            return
        for slot in self._slots:
            self._retire(slot)
        self._slots, self._pending = self._pending, []
        grace = self._settings.timeouts.shutdown_grace
        log.info(
            "reload: %d workers serve the new configuration; the old ones drain for up to %.1f s",
            len(self._slots),
            grace,
        )

    def _retire(self, slot: _Slot) -> None:
        slot.restart_at = None
        if slot.pid is None:
            return
        os.kill(slot.pid, signal.SIGTERM)
        slot.retire_by = monotonic() + slot.settings.timeouts.shutdown_grace + KILL_MARGIN
        self._retiring.append(slot)

    def _kill_late_retirees(self) -> None:
        now = monotonic()
        for slot in self._retiring:
            if slot.pid is not None and slot.retire_by is not None and now >= slot.retire_by:
                log.warning(
                    "worker %d (%s) still running after the grace period; killing it",
                    slot.worker,
                    slot.name,
                )
                os.kill(slot.pid, signal.SIGKILL)
                slot.retire_by = None

    def _signals(self) -> set[int]:
        try:
            return set(os.read(self._wake_r, 512))
        except BlockingIOError:
            return set()

    def _start(self, slot: _Slot) -> None:
        pid = os.fork()
        if pid == 0:
            self._be_worker(slot)
        slot.pid, slot.started_at, slot.restart_at, slot.ready = pid, monotonic(), None, False
        log.info("worker %d started (pid %d)", slot.worker, pid)

    def _be_worker(self, slot: _Slot) -> NoReturn:
        status = 1
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            # Until the worker's loop takes these over, a stop is left to the lifeline, which
            # the supervisor closes when it stops: the worker drains as soon as it serves.
            for signum in STOP_SIGNALS:
                signal.signal(signum, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the supervisor reloads (hangup.py)
            for fd in (self._wake_r, self._wake_w, self._lifeline_w, self._ready_r):
                os.close(fd)
            fleet = Fleet(slot.worker, slot.name, self._runtime_dir)
            status = run_worker(
                slot.settings, self._sock, fleet, self._lifeline_r, self._new_loop, self._ready_w
            )
        except BaseException:
            log.exception("worker %d failed", slot.worker)
        finally:
            logging.shutdown()
            os._exit(status)

    def _reap(self) -> None:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((s for s in self._all() if s.pid == pid), None)
            if slot is not None:
                self._ended(slot, os.waitstatus_to_exitcode(wait_status))

    def _ended(self, slot: _Slot, code: int) -> None:
        slot.pid = None
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        if slot in self._retiring:
            self._retiring.remove(slot)
            (log.info if code == 0 else log.warning)(
                "worker %d of the previous configuration %s", slot.worker, how
            )
            return
        if self._stop_deadline is not None:
            self._clean = self._clean and code == 0
            (log.info if code == 0 else log.warning)("worker %d %s", slot.worker, how)
            return
        now = monotonic()
        slot.quick_deaths = slot.quick_deaths + 1 if now - slot.started_at < QUICK_DEATH else 0
        delay = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (slot.quick_deaths - 1))
        delay = delay if slot.quick_deaths else 0.0
        slot.restart_at = now + delay
        log.warning("worker %d %s; starting it again in %.1f s", slot.worker, how, delay)

    def _restart_due(self) -> None:
        now = monotonic()
        for slot in self._slots + self._pending:
            if slot.restart_at is not None and slot.restart_at <= now:
                self._start(slot)

    def _begin_stop(self) -> None:
        grace = self._settings.timeouts.shutdown_grace
        running = [slot for slot in self._all() if slot.pid is not None]
        log.info("stopping: draining %d workers for up to %.1f s", len(running), grace)
        self._stop_deadline = monotonic() + grace + KILL_MARGIN
        # Once the workers close theirs, no copy of the socket is left: new connections are
        # refused at once rather than queued for nobody.
        self._sock.close()
        os.close(self._lifeline_w)
        for slot in self._slots + self._pending:
            slot.restart_at = None
            if slot.pid is not None:
                os.kill(slot.pid, signal.SIGTERM)

    def _kill_stragglers(self) -> None:
        for slot in self._all():
            if slot.pid is not None:
                log.warning(
                    "worker %d still running after the grace period; killing it", slot.worker
                )
                os.kill(slot.pid, signal.SIGKILL)
        self._clean = False
        self._stop_deadline = monotonic() + KILL_MARGIN  # to reap them
