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
* SIGHUP: ignored, with one log line (proxy.shell.hangup); the workers ignore it silently.
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

from yarl import URL

from proxy.core.errors import ConfigError
from proxy.settings import Settings
from proxy.shell import hangup
from proxy.shell.fleet_metrics import Fleet
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


def supervise(settings: Settings, new_loop: LoopFactory) -> int:
    """Serve with ``settings.workers`` processes until SIGTERM/SIGINT; the exit status."""
    if not hasattr(os, "fork"):
        raise ConfigError("workers: more than one worker needs os.fork (Linux, macOS, BSD)")
    sock = listening_socket(settings.host, settings.port)
    runtime_dir = Path(tempfile.mkdtemp(prefix="toolcall-proxy-"))  # mode 0700
    try:
        return Supervisor(settings, sock, runtime_dir, new_loop).run()
    finally:
        sock.close()
        shutil.rmtree(runtime_dir, ignore_errors=True)


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
    pid: int | None = None
    started_at: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None


def _ignore(signum: int, frame: object) -> None:
    """Wakes the select() through the wakeup fd; the signal is read from the pipe."""


class Supervisor:
    def __init__(
        self, settings: Settings, sock: socket.socket, runtime_dir: Path, new_loop: LoopFactory
    ) -> None:
        self._settings = settings
        self._sock = sock
        self._runtime_dir = runtime_dir
        self._new_loop = new_loop
        self._slots = [_Slot(n) for n in range(1, settings.workers + 1)]
        self._wake_r, self._wake_w = os.pipe()
        # Workers hold the read end; it reads end of file when the supervisor is gone.
        self._lifeline_r, self._lifeline_w = os.pipe()
        self._stop_deadline: float | None = None
        self._clean = True

    def run(self) -> int:
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
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
            select.select([self._wake_r], [], [], self._timeout())
            signals = self._signals()
            if signal.SIGHUP in signals:
                hangup.say_ignored()
            if signals & STOP_SIGNALS and self._stop_deadline is None:
                self._begin_stop()
            self._reap()
            if self._stop_deadline is None:
                self._restart_due()
            elif all(slot.pid is None for slot in self._slots):
                return 0 if self._clean else 1
            elif monotonic() >= self._stop_deadline:
                self._kill_stragglers()

    def _timeout(self) -> float | None:
        if self._stop_deadline is not None:
            return max(0.0, self._stop_deadline - monotonic())
        due = [s.restart_at for s in self._slots if s.restart_at is not None]
        return max(0.0, min(due) - monotonic()) if due else None

    def _signals(self) -> set[int]:
        try:
            return set(os.read(self._wake_r, 512))
        except BlockingIOError:
            return set()

    def _start(self, slot: _Slot) -> None:
        pid = os.fork()
        if pid == 0:
            self._be_worker(slot)
        slot.pid, slot.started_at, slot.restart_at = pid, monotonic(), None
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
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the supervisor says it (hangup.py)
            for fd in (self._wake_r, self._wake_w, self._lifeline_w):
                os.close(fd)
            fleet = Fleet(slot.worker, len(self._slots), self._runtime_dir)
            status = run_worker(self._settings, self._sock, fleet, self._lifeline_r, self._new_loop)
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
            slot = next((s for s in self._slots if s.pid == pid), None)
            if slot is not None:
                self._ended(slot, os.waitstatus_to_exitcode(wait_status))

    def _ended(self, slot: _Slot, code: int) -> None:
        slot.pid = None
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
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
        for slot in self._slots:
            if slot.restart_at is not None and slot.restart_at <= now:
                self._start(slot)

    def _begin_stop(self) -> None:
        grace = self._settings.timeouts.shutdown_grace
        log.info("stopping: draining %d workers for up to %.1f s", len(self._slots), grace)
        self._stop_deadline = monotonic() + grace + KILL_MARGIN
        # Once the workers close theirs, no copy of the socket is left: new connections are
        # refused at once rather than queued for nobody.
        self._sock.close()
        os.close(self._lifeline_w)
        for slot in self._slots:
            slot.restart_at = None
            if slot.pid is not None:
                os.kill(slot.pid, signal.SIGTERM)

    def _kill_stragglers(self) -> None:
        for slot in self._slots:
            if slot.pid is not None:
                log.warning(
                    "worker %d still running after the grace period; killing it", slot.worker
                )
                os.kill(slot.pid, signal.SIGKILL)
        self._clean = False
        self._stop_deadline = monotonic() + KILL_MARGIN  # to reap them
