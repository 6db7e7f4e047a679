"""Replicas of one upstream: which one serves the next attempt, and each one's health.

Pure: the shell drives a :class:`ReplicaPool` with a clock value (``now``, seconds on any
monotonic clock) and tells it what happened; nothing here reads a clock or a socket.

Choice (:meth:`ReplicaPool.pick`), in order:

1. Replicas at their ``max_concurrent_requests`` are out; when all are, the request is refused
   (the shell's 429).
2. Replicas this request already tried are passed over while another one is left.
3. Ejected replicas are passed over, and one on probation (its back-off over) while its one
   trial request is in flight; when no other is left, the one ejected longest ago serves (an
   ejection can be wrong, and a fast 503 helps nobody).
4. With an affinity key: consistent hashing with bounded load (Mirrokni, Thorup and
   Zadimoghaddam, 2016; HAProxy's ``hash-balance-factor``): the key's point on a ring of
   ``POINTS`` virtual points per replica, walked clockwise to the first replica with fewer
   requests in flight than ``LOAD_FACTOR`` times the mean (plus one). A conversation stays on
   one replica, where the server caches its prompt's prefix, until that replica carries more
   than its share.
5. Otherwise the fewest requests in flight; ties go round-robin.

Health is one table, :data:`TRANSITIONS`: (state, signal) -> (state, effect). An ejection
lasts ``backoff(failures)``: ``base`` seconds, doubled for each failure since the replica last
answered, up to ``cap``. An outcome of an attempt that began before the replica's current
ejection is ``STALE`` and changes nothing: twenty requests that were already connecting when a
replica died eject it once, not twenty times.
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Final

#: virtual points per replica on the affinity ring: enough for an even spread over a few
#: replicas, few enough that building the ring costs nothing
POINTS: Final = 64
#: how far above the mean load a replica may go before a conversation's key moves on
LOAD_FACTOR: Final = 1.25


class Health(Enum):
    UP = auto()  # serves
    EJECTED = auto()  # failed: passed over until its back-off ends (or a probe answers)
    PROBATION = auto()  # its back-off ended: serves; one failure ejects it again, for longer


class Signal(Enum):
    ANSWERED = auto()  # an attempt got a response head that is not 502/503/504
    FAILED = auto()  # connect error, reset before the head, 502/503/504
    STALE = auto()  # an outcome of an attempt begun before the current ejection
    BACKOFF_OVER = auto()
    PROBE_OK = auto()  # the active health check (health_path) answered 2xx
    PROBE_FAILED = auto()


class Effect(Enum):
    NONE = auto()
    RESET = auto()  # failures forgotten
    EJECT = auto()  # one failure more; ejected for backoff(failures) from now


#: the replica's health, whole: a pair missing here is a bug (KeyError)
TRANSITIONS: Final[dict[tuple[Health, Signal], tuple[Health, Effect]]] = {
    (Health.UP, Signal.ANSWERED): (Health.UP, Effect.RESET),
    (Health.UP, Signal.FAILED): (Health.EJECTED, Effect.EJECT),
    (Health.UP, Signal.STALE): (Health.UP, Effect.NONE),
    (Health.UP, Signal.BACKOFF_OVER): (Health.UP, Effect.NONE),
    (Health.UP, Signal.PROBE_OK): (Health.UP, Effect.NONE),
    (Health.UP, Signal.PROBE_FAILED): (Health.EJECTED, Effect.EJECT),
    # answered after its ejection: a request sent to it anyway (every replica ejected)
    (Health.EJECTED, Signal.ANSWERED): (Health.UP, Effect.RESET),
    # failed after its ejection (sent anyway): ejected anew, for longer, so that with every
    # replica ejected the attempts go round them
    (Health.EJECTED, Signal.FAILED): (Health.EJECTED, Effect.EJECT),
    (Health.EJECTED, Signal.STALE): (Health.EJECTED, Effect.NONE),
    (Health.EJECTED, Signal.BACKOFF_OVER): (Health.PROBATION, Effect.NONE),
    (Health.EJECTED, Signal.PROBE_OK): (Health.UP, Effect.RESET),
    (Health.EJECTED, Signal.PROBE_FAILED): (Health.EJECTED, Effect.NONE),
    (Health.PROBATION, Signal.ANSWERED): (Health.UP, Effect.RESET),
    (Health.PROBATION, Signal.FAILED): (Health.EJECTED, Effect.EJECT),
    (Health.PROBATION, Signal.STALE): (Health.PROBATION, Effect.NONE),
    (Health.PROBATION, Signal.BACKOFF_OVER): (Health.PROBATION, Effect.NONE),
    (Health.PROBATION, Signal.PROBE_OK): (Health.UP, Effect.RESET),
    (Health.PROBATION, Signal.PROBE_FAILED): (Health.EJECTED, Effect.EJECT),
}


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long an ejection lasts: ``base`` seconds, doubled per failure since the replica
    last answered, at most ``cap``."""

    base: float
    cap: float

    def after(self, failures: int) -> float:
        return min(self.cap, self.base * 2.0 ** max(0, failures - 1))


@dataclass(slots=True)
class Replica:
    url: str
    health: Health = Health.UP
    in_flight: int = 0
    failures: int = 0  # since it last answered
    ejected_at: float = -math.inf
    ejected_until: float = -math.inf


@dataclass(frozen=True, slots=True)
class Change:
    """What a signal did to a replica, for the shell to count and log."""

    replica: Replica
    before: Health
    after: Health
    ejected_for: float | None  # seconds, when this signal ejected it


@dataclass(slots=True)
class ReplicaPool:
    """One upstream's replicas (a single URL is a pool of one), per process."""

    urls: Sequence[str]
    backoff: Backoff
    limit: int | None = None  # max_concurrent_requests, per replica
    replicas: list[Replica] = field(init=False)
    _ring: list[tuple[int, int]] = field(init=False)  # (point, replica index), sorted
    _turn: int = field(init=False, default=0)  # round-robin among ties

    def __post_init__(self) -> None:
        self.replicas = [Replica(url) for url in self.urls]
        self._ring = sorted(
            (_point(f"{url}#{n}"), i) for i, url in enumerate(self.urls) for n in range(POINTS)
        )

    # -- choice -------------------------------------------------------------------------------

    def pick(
        self,
        now: float,
        key: str | None = None,
        tried: Collection[int] = (),
        *,
        limited: bool = True,
    ) -> int | None:
        """The replica (its index) for the next attempt; None when every one is at its limit.
        ``limited=False``: a request the limit does not hold back (the proxy's own listing)."""
        self._end_backoffs(now)
        room = [i for i, r in enumerate(self.replicas) if not (limited and self._full(r))]
        if not room:
            return None
        fresh = [i for i in room if i not in tried] or room
        serving = [i for i in fresh if _serves(self.replicas[i])]
        if not serving:
            return min(fresh, key=lambda i: self.replicas[i].ejected_at)
        if key is not None and len(serving) > 1:
            chosen = self._by_key(key, serving)
            if chosen is not None:
                return chosen
        return self._least_loaded(serving)

    def _full(self, replica: Replica) -> bool:
        return self.limit is not None and replica.in_flight >= self.limit

    def _by_key(self, key: str, serving: list[int]) -> int | None:
        allowed = set(serving)
        load = sum(self.replicas[i].in_flight for i in serving)
        bound = math.ceil(LOAD_FACTOR * (load + 1) / len(serving))
        start = bisect_left(self._ring, (_point(key), -1))
        seen: set[int] = set()
        for step in range(len(self._ring)):
            index = self._ring[(start + step) % len(self._ring)][1]
            if index in seen or index not in allowed:
                continue
            if self.replicas[index].in_flight < bound:
                return index
            seen.add(index)
            if len(seen) == len(allowed):
                break
        return None

    def _least_loaded(self, serving: list[int]) -> int:
        fewest = min(self.replicas[i].in_flight for i in serving)
        tied = [i for i in serving if self.replicas[i].in_flight == fewest]
        n = len(self.replicas)
        # the first tied replica at or after the turn, so that ties go round
        chosen = min(tied, key=lambda i: (i - self._turn) % n)
        self._turn = (chosen + 1) % n
        return chosen

    # -- what happened ------------------------------------------------------------------------

    def begin(self, index: int) -> None:
        self.replicas[index].in_flight += 1

    def end(self, index: int) -> None:
        self.replicas[index].in_flight -= 1

    def answered(self, index: int, now: float, *, began: float) -> Change:
        return self._signal(index, self._fresh(index, Signal.ANSWERED, began), now)

    def failed(self, index: int, now: float, *, began: float) -> Change:
        return self._signal(index, self._fresh(index, Signal.FAILED, began), now)

    def probed(self, index: int, now: float, *, ok: bool) -> Change:
        return self._signal(index, Signal.PROBE_OK if ok else Signal.PROBE_FAILED, now)

    def _fresh(self, index: int, signal: Signal, began: float) -> Signal:
        replica = self.replicas[index]
        stale = replica.health is Health.EJECTED and began <= replica.ejected_at
        return Signal.STALE if stale else signal

    def _end_backoffs(self, now: float) -> None:
        for index, replica in enumerate(self.replicas):
            if replica.health is Health.EJECTED and now >= replica.ejected_until:
                self._signal(index, Signal.BACKOFF_OVER, now)

    def _signal(self, index: int, signal: Signal, now: float) -> Change:
        replica = self.replicas[index]
        before = replica.health
        replica.health, effect = TRANSITIONS[before, signal]
        ejected_for = None
        if effect is Effect.RESET:
            replica.failures = 0
        elif effect is Effect.EJECT:
            replica.failures += 1
            ejected_for = self.backoff.after(replica.failures)
            replica.ejected_at = now
            replica.ejected_until = now + ejected_for
        return Change(replica, before, replica.health, ejected_for)


def _serves(replica: Replica) -> bool:
    """Up, or on probation with no request yet: one trial at a time, so that a replica back
    from its back-off, with none in flight, does not draw every new request at once (if it
    is still down, only the trial pays for it)."""
    if replica.health is Health.PROBATION:
        return replica.in_flight == 0
    return replica.health is Health.UP


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
