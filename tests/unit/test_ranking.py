from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schedpolicy.core.consolidation.ranking import (
    RankedPod,
    compare,
    rank_pods,
    read_deletion_cost,
    scale_down,
)
from schedpolicy.core.timestamps import parse_nanos, to_nanos

NOW = to_nanos(datetime(2026, 11, 30, 12, 0, tzinfo=UTC))


def span(**kw: float) -> int:
    return timedelta(**kw) // timedelta(microseconds=1) * 1000


def rp(name: str, **kw: Any) -> RankedPod:
    base: dict[str, Any] = dict(
        uid=f"uid-{name}",
        node="n1",
        phase="Running",
        ready=True,
        cost=0,
        rank=1,
        ready_since=NOW - span(hours=1),
        restarts=(0, 0),
        created=NOW - span(hours=2),
    )
    base.update(kw)
    return RankedPod(name=name, **base)


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (rp("a", node=""), rp("b"), "not scheduled"),
        (rp("a", phase="Pending"), rp("b"), "earlier phase"),
        (rp("a", phase="Unknown"), rp("b"), "earlier phase"),
        (rp("a", ready=False, ready_since=None), rp("b"), "not ready"),
        (rp("a", cost=-5), rp("b", cost=0), "lower pod-deletion-cost"),
        (rp("a", cost=-(2**31)), rp("b", cost=2**31 - 1), "lower pod-deletion-cost"),
        (rp("a", rank=3), rp("b", rank=1), "more replicas on the same node"),
        (rp("a", ready_since=NOW - span(seconds=10)), rp("b"), "more recently ready"),
        (rp("a", restarts=(3, 0)), rp("b"), "more restarts"),
        (rp("a", restarts=(0, 2)), rp("b"), "more restarts"),
        (rp("a", created=NOW - span(minutes=1)), rp("b"), "more recently created"),
    ],
)
def test_each_criterion(first: RankedPod, second: RankedPod, why: str) -> None:
    assert compare(first, second, NOW) == (-1, why)
    assert compare(second, first, NOW)[0] == 1


def test_criteria_are_applied_in_order() -> None:
    # Readiness beats cost; cost beats co-location and age.
    assert compare(rp("a", ready=False, cost=1000), rp("b", cost=-1000), NOW)[1] == "not ready"
    assert compare(rp("a", cost=-1, rank=1, created=NOW - span(days=9)), rp("b", rank=5), NOW)[
        1
    ] == ("lower pod-deletion-cost")


def test_same_log_scale_falls_back_to_uid() -> None:
    a = rp("a", uid="aaa", ready_since=NOW - span(seconds=100))
    b = rp("b", uid="bbb", ready_since=NOW - span(seconds=101))
    assert compare(a, b, NOW) == (-1, "ready on the same log scale: UID order")
    assert compare(b, a, NOW)[0] == 1


def test_full_tie_and_uncertain_cut() -> None:
    t = NOW - span(hours=1)
    a, b = rp("a", ready_since=t, created=t), rp("b", ready_since=t, created=t)
    assert compare(a, b, NOW) == (0, "tie")
    assert not scale_down([a, b], 1, NOW).certain
    assert scale_down([a, rp("c", cost=5, ready_since=t, created=t)], 1, NOW).certain


def test_scale_down_explains_each_victim() -> None:
    pods = [
        rp("keep", cost=100),
        rp("spot", cost=-100),
        rp("pending", phase="Pending"),
        rp("mid", cost=0),
    ]
    result = scale_down(pods, 2, NOW)
    assert [v.pod.name for v in result.victims] == ["pending", "spot"]
    assert [v.reason for v in result.victims] == ["earlier phase", "lower pod-deletion-cost"]
    assert [p.name for p in result.survivors] == ["mid", "keep"]
    assert result.certain


def test_rank_pods_reads_pod_objects() -> None:
    def pod(name: str, node: str | None, ready: bool = True, **extra: Any) -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "uid": f"u-{name}",
                "creationTimestamp": "2026-11-30T11:00:00Z",
                **extra,
            },
            "spec": {"nodeName": node},
            "status": {
                "phase": "Running" if node else "Pending",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "lastTransitionTime": "2026-11-30T11:00:05Z",
                    }
                ],
                "containerStatuses": [{"name": "c", "restartCount": 2}],
            },
        }

    pods = [
        pod("a", "n1", annotations={"controller.kubernetes.io/pod-deletion-cost": "-7"}),
        pod("b", "n1"),
        pod("c", None, ready=False),
    ]
    other = pod("x", "n1")  # a pod of an older ReplicaSet of the same Deployment
    ranked = {p.name: p for p in rank_pods(pods, [*pods, other])}
    assert ranked["a"].cost == -7
    assert ranked["a"].rank == 3  # a, b and x are on n1 and active; c has no node
    assert ranked["c"].node == ""
    assert ranked["b"].restarts == (2, 0)
    assert ranked["c"].ready is False


@pytest.mark.parametrize(
    ("value", "cost"),
    [
        (None, 0),
        ("", 0),
        ("0", 0),
        ("5", 5),
        ("-5", -5),
        ("-0", 0),
        ("-007", -7),  # only the first character is checked for a leading zero
        ("2147483647", 2**31 - 1),
        ("-2147483648", -(2**31)),
        ("2147483648", 0),  # out of int32: ParseInt fails, upstream uses 0
        ("-2147483649", 0),
        ("+5", 0),
        ("007", 0),
        ("00", 0),
        (" 5", 0),
        ("5 ", 0),
        ("1_0", 0),
        ("\u0665", 0),  # an Arabic-Indic five: int() takes it, ParseInt does not
        ("1\u0665", 0),
        ("--5", 0),
        ("-", 0),
        ("5e2", 0),
        ("0x10", 0),
    ],
)
def test_cost_is_read_as_upstream_reads_it(value: str | None, cost: int) -> None:
    assert read_deletion_cost(value) == cost


def test_times_keep_their_nanoseconds() -> None:
    base = to_nanos(datetime(2026, 11, 30, 11, 0, tzinfo=UTC))
    assert parse_nanos("2026-11-30T11:00:00Z") == base
    assert parse_nanos("2026-11-30T11:00:00.000000001Z") == base + 1
    assert parse_nanos("2026-11-30T11:00:00.5+00:00") == base + 500_000_000
    assert parse_nanos("2026-11-30T12:00:00.123456789+01:00") == base + 123_456_789
    assert parse_nanos(None) is None


def test_log_scale_is_cut_at_the_nanosecond() -> None:
    # Ages 2^36 ns and 2^36 - 1 ns (about 68.7 s) sit on different log2 scales. A clock in
    # microseconds cannot see that difference; upstream's does.
    ready = to_nanos(datetime(2026, 11, 30, 11, 0, tzinfo=UTC))
    now = ready + 2**36
    older = rp("older", uid="a", ready_since=ready)
    newer = rp("newer", uid="b", ready_since=ready + 1)
    assert compare(newer, older, now) == (-1, "more recently ready")
    assert compare(newer, older, now + 1) == (1, "ready on the same log scale: UID order")


def go_sort(pods: list[RankedPod], now: int) -> list[RankedPod]:
    """Go's sort.Sort for up to 12 elements: pdqsort hands them to this insertion sort."""
    data = list(pods)
    for i in range(1, len(data)):
        j = i
        while j > 0 and compare(data[j], data[j - 1], now)[0] < 0:
            data[j], data[j - 1] = data[j - 1], data[j]
            j -= 1
    return data


def go_victims(pods: list[RankedPod], replicas: int, now: int) -> set[frozenset[str]]:
    """What the controller deletes for every order the informer could list the pods in."""
    cut = len(pods) - replicas
    return {
        frozenset(p.name for p in go_sort(list(order), now)[:cut])
        for order in itertools.permutations(pods)
    }


def cycle_pods() -> list[RankedPod]:
    """Issue 15's three pods: a and b ready in the same second (a restarted once), c a second
    later, all about 100 s ago, on one log2 scale; UIDs ordered b < c < a."""
    t = NOW - span(seconds=100)
    created = NOW - span(seconds=200)
    return [
        rp("a", uid="u3", ready_since=t, restarts=(1, 0), created=created),
        rp("b", uid="u1", ready_since=t, created=created),
        rp("c", uid="u2", ready_since=t + span(seconds=1), created=created),
    ]


def test_the_three_pod_cycle() -> None:
    a, b, c = cycle_pods()
    assert compare(a, b, NOW) == (-1, "more restarts")
    assert compare(b, c, NOW) == (-1, "ready on the same log scale: UID order")
    assert compare(c, a, NOW) == (-1, "ready on the same log scale: UID order")
    # Go's answer depends on the listing order: each of the three, for some order.
    assert go_victims([a, b, c], 2, NOW) == {frozenset("a"), frozenset("b"), frozenset("c")}
    for order in itertools.permutations([a, b, c]):
        result = scale_down(list(order), 2, NOW)
        assert not result.certain
        assert result.uncertainty is not None
        assert {p.name for p in result.uncertainty.candidates} == {"a", "b", "c"}
        assert result.uncertainty.deleted == 1
        why = result.uncertainty.why
        assert "a before b by more restarts" in why
        assert why.count("by ready on the same log scale: UID order") == 2
        assert why.count("before") == 3  # a round trip of three strict steps


@pytest.mark.parametrize("replicas", [0, 1, 2, 3, 4])
def test_every_listing_order_deletes_within_what_simulate_names(replicas: int) -> None:
    d = rp("d", uid="u0", cost=50)  # worth more than the cycle: never deleted before it
    e = rp("e", uid="u9", cost=-50)  # worth less: always deleted first
    pods = [*cycle_pods(), d, e]
    outcomes = go_victims(pods, replicas, NOW)
    for order in itertools.permutations(pods):
        result = scale_down(list(order), replicas, NOW)
        predicted = {v.pod.name for v in result.victims}
        if result.certain:
            assert outcomes == {frozenset(predicted)}, order
        else:
            assert result.uncertainty is not None
            named = {p.name for p in result.uncertainty.candidates}
            sure = predicted - named
            # Every real outcome is the sure victims plus the right number of candidates.
            for outcome in outcomes:
                assert sure <= outcome
                assert outcome - sure <= named
                assert len(outcome - sure) == result.uncertainty.deleted
            assert set().union(*outcomes) - sure == named
    # With 0, 4 or all of them kept, the cut misses the cycle and every order agrees.
    assert (len(outcomes) == 1) is (replicas in (0, 4, 1))
