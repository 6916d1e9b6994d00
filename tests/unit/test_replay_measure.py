"""B7's figures from what the watches saw and the audit log held."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.replay import measure
from bench.replay.observe import NodeSeen, PodSeen, Seen, node_gpus
from bench.replay.plan import Plan, Shape, Step, Timers
from localcluster.audit import OPERATOR_USER, AuditEvent
from localcluster.karpenter import GPU, load_catalog

CATALOG = load_catalog()
SERVICES = (Shape("lm", 1, "4", "1Gi"), Shape("big", 8, "4", "1Gi"), Shape("fe", 0, "1", "1Gi"))


def plan(steps: tuple[Step, ...] = (), initial: dict[str, int] | None = None) -> Plan:
    # Two buckets at 30x: 40 s of replay, 20 minutes of the day.
    return Plan(SERVICES, 0, 1200, Timers(), initial or {"lm": 4, "big": 1, "fe": 1}, steps)


def node(
    name: str,
    added: float,
    gone: float | None,
    kind: str = "g5.12xlarge",
    cap: str = "spot",
    deleting: float | None = None,
) -> NodeSeen:
    gpus = CATALOG.by_name()[kind].gpus
    return NodeSeen(name, kind, cap, gpus, "gpu", added, deleting=deleting, gone=gone)


def test_node_hours_and_dollars_count_only_the_day_on_the_trace_clock() -> None:
    nodes = [
        node("a", -5, None),  # up before the day: counted from 0 to the end, 40 s
        node("b", 10, 30, "g5.48xlarge", "on-demand"),  # 20 s
        node("c", 2, 12, "c5.xlarge"),  # a CPU node: dollars only
    ]
    figures = measure.node_figures(nodes, CATALOG, end=40, k=30)
    # 60 s of GPU nodes x 30 = 0.5 hours.
    assert figures["gpu_node_hours"] == 0.5
    assert figures["gpu_hours_provisioned"] == pytest.approx(
        (40 * 4 + 20 * 8) * 30 / 3600, abs=0.05
    )
    gpu = (40 * 2.269 + 20 * 16.288) * 30 / 3600
    assert figures["gpu_dollars"] == pytest.approx(gpu, abs=0.01)
    assert figures["dollars"] == pytest.approx(gpu + 10 * 0.068 * 30 / 3600, abs=0.01)


def test_needed_gpu_hours_and_the_offline_bound_follow_the_plan() -> None:
    # 4 x 1 GPU and 1 x 8 GPUs for 20 s, then 2 x 1 GPU and the 8 for 20 s.
    p = plan((Step(20, "lm", 2),))
    assert measure.needed_gpu_hours(p) == pytest.approx((12 * 20 + 10 * 20) * 30 / 3600)
    bound = measure.offline_bound(p, CATALOG)
    # 12 GPUs: 2 nodes of 8; 10 GPUs: 2 nodes. 40 s x 2 nodes x 30 = 2400 s.
    assert bound["gpu_node_hours"] == pytest.approx(2 / 3, abs=0.01)
    # Cheapest: the 8-GPU replica on g5.48xlarge spot, the rest on one g5.12xlarge spot.
    assert bound["gpu_dollars"] == pytest.approx((6.515 + 2.269) * 40 * 30 / 3600, abs=0.01)


def test_disruption_tells_evicted_pods_and_pods_on_a_deleted_node_from_scale_down_victims() -> None:
    seen = Seen(
        nodes={
            "n1": node("n1", 0, 25, deleting=20),  # two pods still on it: consolidated
            "n2": node("n2", 0, 35, deleting=30),  # its pod left by scale-down first: emptied
            "n3": node("n3", 0, None),
        },
        pods={
            "p1": PodSeen("lm-1", "lm", 0, "n1", 0.5, 1),
            "p2": PodSeen("lm-2", "lm", 0, "n1", 0.5, 1),
            "p3": PodSeen("fe-1", "fe", 0, "n1", 0.5, 1),
            "p4": PodSeen("lm-4", "lm", 0, "n2", 0.5, 1, deleting=12, gone=12),
            "p5": PodSeen("lm-5", "lm", 0, "n3", 0.5, 1),
        },
    )
    evictions = [
        measure.Eviction("lm-1", 21),
        measure.Eviction("lm-5", 50),
    ]  # the second: after the day
    found = measure.disruption(seen, evictions, {"lm"}, end=40)
    assert found == {
        "serving_pods_disrupted": 2,  # lm-1 (evicted) and lm-2 (on n1 as it went)
        "serving_pods_evicted": 1,
        "pods_disrupted": 3,  # and the frontend
        "nodes_emptied": 1,
        "nodes_consolidated_moving_pods": 1,
    }


def test_pending_is_per_gpu_size_for_pods_created_during_the_day() -> None:
    seen = Seen(
        nodes={"n": node("n", 0, None), "m": node("m", 3, None)},
        pods={
            "w": PodSeen("lm-w", "lm", -3, "n", -2, -1),  # warm-up: not a scale-up
            "a": PodSeen("lm-a", "lm", 1, "n", 1.5, 2),
            "b": PodSeen("lm-b", "lm", 2, "m", 4, 5),  # waited for m's launch
            "c": PodSeen("big-c", "big", 3, "", None),  # never bound
            "d": PodSeen("big-d", "big", 3, "", None, gone=4),  # scaled away while pending
        },
    )
    found = measure.pending(seen, {"lm": 1, "big": 8, "fe": 0}, end=40, k=30)
    assert found["1"] == {
        "pods": 2,
        "p50_s": 15.0,
        "p95_s": 60.0,
        "never_bound": 0,
        "on_new_node": 1,
    }
    assert found["8"] == {
        "pods": 0,
        "p50_s": None,
        "p95_s": None,
        "never_bound": 1,
        "on_new_node": 0,
    }


def test_the_series_counts_nodes_pods_and_dollars_spent(tmp_path: Path) -> None:
    seen = Seen(
        nodes={"n": node("n", 0, 25)},
        pods={"p": PodSeen("lm-1", "lm", 0, "n", 5, 6, gone=15)},
    )
    s = measure.series(seen, plan(), CATALOG, step=10)
    assert s["t_hours"] == [0.0, 0.083, 0.167, 0.25, 0.333]
    assert s["gpu_nodes"] == [1, 1, 1, 0, 0]
    assert s["serving_pods"] == [0, 1, 0, 0, 0]
    assert s["dollars"][-1] == pytest.approx(25 * 2.269 * 30 / 3600, abs=0.01)


@pytest.mark.parametrize(
    ("status", "gpus"),
    [
        # Karpenter's KWOK provider: capacity is the launching pods' requests, allocatable
        # the instance type's.
        ({"capacity": {GPU: "1"}, "allocatable": {GPU: "4"}}, 4),
        # A real node: capacity at least allocatable.
        ({"capacity": {GPU: "8"}, "allocatable": {GPU: "7"}}, 8),
        ({"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}, 0),
        ({}, 0),
    ],
)
def test_a_nodes_gpus_are_what_its_type_holds_not_what_launched_it(
    status: dict[str, dict[str, str]], gpus: int
) -> None:
    assert node_gpus({"metadata": {"name": "n"}, "status": status}) == gpus


WALL0 = datetime(2026, 12, 6, tzinfo=UTC)


def logged(verb: str, user: str, at: float, code: int = 200, uid: str = "u1") -> AuditEvent:
    cost = "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost"
    body = [{"op": "test", "path": "/metadata/uid", "value": uid}, {"op": "add", "path": cost}]
    when = WALL0 + timedelta(seconds=at)
    request = body if user == OPERATOR_USER else None
    return AuditEvent(user, "x/1", verb, "pods", "", "ns", "lm-1", code, when, request, "", when)


@pytest.mark.parametrize("skew", [0.0, -0.5, 0.5, -3600.0, 3600.0])
def test_the_write_audit_does_not_read_the_watchers_clock(skew: float) -> None:
    """The ReplicaSet controller removes lm-1 (grace 0, as B7's pods have) at 10 s on the
    apiserver's clock; the operator's patch received 3 ms before is accepted, the one 5 ms
    after refused. The watch, however late or early its clock, only says lm-1 went."""
    log = [
        logged("patch", OPERATOR_USER, 9.997),
        logged("delete", "system:serviceaccount:kube-system:replicaset-controller", 10.0),
        logged("patch", OPERATOR_USER, 10.005, 404),
    ]
    seen = Seen(pods={"u1": PodSeen("lm-1", "lm", 0, "n1", 0.5, 1, gone=10.0 + skew)})
    found = measure.write_audit(log, seen, "ns")
    assert {k: found[k] for k in ("writes", "attempts", "refused_not_found")} == {
        "writes": 2, "attempts": 2, "refused_not_found": 1,
    }  # fmt: skip
    assert found["succeeded_after_gone"] == found["accepted_while_deleting"] == 0
    assert found["to_gone"] == 1
    assert found["gone_clock"] == "apiserver"
