"""The replica pool alone (proxy/core/replicas.py): the choice, and the health table driven
with clock values."""

from __future__ import annotations

from collections import Counter

from proxy.core.replicas import TRANSITIONS, Backoff, Health, ReplicaPool, Signal

URLS = ("http://a", "http://b", "http://c")


def pool(n: int = 3, limit: int | None = None) -> ReplicaPool:
    return ReplicaPool(URLS[:n], Backoff(5.0, 120.0), limit)


def test_the_table_covers_every_state_and_signal() -> None:
    assert set(TRANSITIONS) == {(h, s) for h in Health for s in Signal}


def test_least_outstanding_with_ties_round_robin() -> None:
    p = pool()
    picks = []
    for _ in range(6):
        i = p.pick(0.0)
        assert i is not None
        p.begin(i)
        picks.append(i)
    assert picks == [0, 1, 2, 0, 1, 2]
    p.end(1)
    assert p.pick(0.0) == 1  # the fewest in flight, whatever the turn


def test_the_backoff_doubles_to_its_cap_and_an_answer_resets_it() -> None:
    p = pool()
    lengths = []
    now = 0.0
    for _ in range(7):
        change = p.failed(0, now, began=now)
        assert change.after is Health.EJECTED
        assert change.ejected_for is not None
        lengths.append(change.ejected_for)
        now += change.ejected_for
        p.pick(now)  # the back-off is over: probation
        assert p.replicas[0].health is Health.PROBATION
        now += 0.1
    assert lengths == [5, 10, 20, 40, 80, 120, 120]
    assert p.answered(0, now, began=now).after is Health.UP
    assert p.failed(0, now + 1, began=now + 1).ejected_for == 5


def test_an_ejected_replica_is_passed_over_until_its_backoff_ends() -> None:
    p = pool(2)
    p.failed(0, 10.0, began=10.0)
    assert {p.pick(11.0) for _ in range(4)} == {1}
    assert p.pick(15.0) == 0  # back on probation; a tie with b, its turn


def test_failures_of_attempts_begun_before_the_ejection_count_once() -> None:
    p = pool()
    ejections = [p.failed(0, 1.0 + n / 100, began=0.5).ejected_for for n in range(20)]
    assert ejections.count(None) == 19
    assert p.replicas[0].failures == 1
    # an answer of an attempt begun before the ejection does not bring it back
    assert p.answered(0, 1.5, began=0.5).after is Health.EJECTED


def test_every_replica_ejected_serves_the_one_ejected_longest_ago() -> None:
    p = pool()
    p.failed(1, 1.0, began=1.0)
    p.failed(0, 2.0, began=2.0)
    p.failed(2, 3.0, began=3.0)
    assert p.pick(3.5) == 1
    p.failed(1, 3.6, began=3.6)  # sent anyway, failed again: ejected anew, for longer
    assert p.replicas[1].ejected_until == 3.6 + 10
    assert p.pick(3.7) == 0


def test_full_replicas_are_passed_over_and_all_full_is_none() -> None:
    p = pool(2, limit=1)
    p.begin(0)
    assert p.pick(0.0) == 1
    p.begin(1)
    assert p.pick(0.0) is None
    assert p.pick(0.0, limited=False) is not None


def test_a_retry_prefers_a_replica_not_tried() -> None:
    p = pool()
    assert p.pick(0.0, tried=[0]) in (1, 2)
    assert p.pick(0.0, tried=[0, 1]) == 2
    assert p.pick(0.0, tried=[0, 1, 2]) is not None  # every one tried: any of them again


def test_a_key_names_one_replica_and_keys_spread() -> None:
    p = pool()
    homes = {key: p.pick(0.0, key) for key in (f"conversation {n}" for n in range(300))}
    assert all(p.pick(0.0, key) == home for key, home in homes.items())
    counts = Counter(homes.values())
    assert set(counts) == {0, 1, 2}
    assert min(counts.values()) > 50  # 64 points each: no replica is starved


def test_a_key_moves_on_when_its_replica_carries_more_than_its_share() -> None:
    p = pool()
    home = p.pick(0.0, "k")
    assert home is not None
    for _ in range(3):
        p.begin(home)
    # mean load 1, plus one, times 1.25: a bound of 2, and home has 3
    other = p.pick(0.0, "k")
    assert other is not None
    assert other != home
    for _ in range(3):
        p.end(home)
    assert p.pick(0.0, "k") == home


def test_an_ejected_home_sends_its_key_elsewhere_and_it_comes_back() -> None:
    p = pool()
    home = p.pick(0.0, "k")
    assert home is not None
    p.failed(home, 1.0, began=1.0)
    assert p.pick(2.0, "k") != home
    p.probed(home, 3.0, ok=True)
    assert p.pick(3.0, "k") == home


def test_probes_eject_and_restore() -> None:
    p = pool()
    change = p.probed(0, 1.0, ok=False)
    assert (change.before, change.after, change.ejected_for) == (Health.UP, Health.EJECTED, 5)
    assert p.probed(0, 2.0, ok=False).ejected_for is None  # still out, not for longer
    assert p.probed(0, 3.0, ok=True).after is Health.UP


def test_probation_takes_one_trial_at_a_time() -> None:
    p = pool(2)
    p.failed(0, 0.0, began=0.0)
    p.begin(1)
    p.begin(1)
    assert p.pick(6.0) == 0  # its back-off is over, and it has the fewest in flight
    p.begin(0)
    assert p.pick(6.0) == 1  # not a second one before the trial answers
    assert p.answered(0, 6.5, began=6.0).after is Health.UP
    assert p.pick(6.5) == 0
