from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schedpolicy.ranking import RankedPod, compare, rank_pods, scale_down

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def rp(name: str, **kw: Any) -> RankedPod:
    base: dict[str, Any] = dict(
        uid=f"uid-{name}",
        node="n1",
        phase="Running",
        ready=True,
        cost=0,
        rank=1,
        ready_since=NOW - timedelta(hours=1),
        restarts=(0, 0),
        created=NOW - timedelta(hours=2),
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
        (rp("a", ready_since=NOW - timedelta(seconds=10)), rp("b"), "more recently ready"),
        (rp("a", restarts=(3, 0)), rp("b"), "more restarts"),
        (rp("a", restarts=(0, 2)), rp("b"), "more restarts"),
        (rp("a", created=NOW - timedelta(minutes=1)), rp("b"), "more recently created"),
    ],
)
def test_each_criterion(first: RankedPod, second: RankedPod, why: str) -> None:
    assert compare(first, second, NOW) == (-1, why)
    assert compare(second, first, NOW)[0] == 1


def test_criteria_are_applied_in_order() -> None:
    # Readiness beats cost; cost beats co-location and age.
    assert compare(rp("a", ready=False, cost=1000), rp("b", cost=-1000), NOW)[1] == "not ready"
    assert compare(rp("a", cost=-1, rank=1, created=NOW - timedelta(days=9)), rp("b", rank=5), NOW)[
        1
    ] == ("lower pod-deletion-cost")


def test_same_log_scale_falls_back_to_uid() -> None:
    a = rp("a", uid="aaa", ready_since=NOW - timedelta(seconds=100))
    b = rp("b", uid="bbb", ready_since=NOW - timedelta(seconds=101))
    assert compare(a, b, NOW) == (-1, "ready on the same log scale: UID order")
    assert compare(b, a, NOW)[0] == 1


def test_full_tie_and_uncertain_cut() -> None:
    t = NOW - timedelta(hours=1)
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
