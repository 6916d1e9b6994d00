"""A pod's change re-plans only the pods of its ReplicaSet whose ZoneBalance score it moves,
and what the reconciler then holds matches a recompute of every pod from scratch."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from schedpolicy.core.deletion_cost.signals.base import ZoneCounts
from schedpolicy.core.deletion_cost.signals.zone_balance import moved
from schedpolicy.view.cluster import ClusterView
from schedpolicy.view.deletion_cost import decisions
from schedpolicy.view.dirty import Dirty

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
ZONES = frozenset({"a", "b", "c"})


def spread(counts: dict[str, int], ranks: dict[str, int]) -> ZoneCounts:
    return ZoneCounts(counts, ranks)


# Three zones; a holds p0..p3 (ranks 0..3), b p4 p5, c p6 p7 p8: least-filled is b with 2.
BEFORE = spread(
    {"a": 4, "b": 2, "c": 3},
    {"p0": 0, "p1": 1, "p2": 2, "p3": 3, "p4": 0, "p5": 1, "p6": 0, "p7": 1, "p8": 2},
)
MEMBERS = frozenset(BEFORE.ranks)


@pytest.mark.parametrize(
    ("case", "after", "members", "expected"),
    [
        ("nothing changed", BEFORE, MEMBERS, set()),
        (
            # p9 is new in a: only it (unranked before) is re-planned.
            "a create in the fullest zone",
            spread({**BEFORE.counts, "a": 5}, {**BEFORE.ranks, "p9": 4}),
            MEMBERS | {"p9"},
            {"p9"},
        ),
        (
            # p1 leaves a: p2 and p3 move down a place, both above the least (2).
            "an old pod of the fullest zone goes",
            spread({**BEFORE.counts, "a": 3}, {**BEFORE.ranks, "p2": 1, "p3": 2}),
            MEMBERS - {"p1"},
            {"p2", "p3"},
        ),
        (
            # p5 leaves b, the least-filled: the least drops to 1, so every pod from the
            # second place up in every zone moves; p4 (first in b) does not.
            "a pod of the least-filled zone goes",
            spread({**BEFORE.counts, "b": 1}, {k: v for k, v in BEFORE.ranks.items() if k != "p5"}),
            MEMBERS - {"p5"},
            {"p1", "p2", "p3", "p7", "p8"},
        ),
        (
            # p0 was pending (unranked) and is still: it is re-planned, as score reads it.
            "an unranked pod is always looked at",
            spread(BEFORE.counts, {k: v for k, v in BEFORE.ranks.items() if k != "p0"}),
            MEMBERS,
            {"p0"},
        ),
    ],
)
def test_moved(case: str, after: ZoneCounts, members: frozenset[str], expected: set[str]) -> None:
    assert moved([BEFORE], after, ZONES, members) == expected, case


def test_moved_compares_every_spread_a_plan_may_have_read() -> None:
    middle = spread({**BEFORE.counts, "a": 3}, {**BEFORE.ranks, "p2": 1, "p3": 2})
    # Back where it began: against BEFORE nothing moved, but a plan that read `middle`
    # costed p2 and p3 differently.
    assert moved([BEFORE], BEFORE, ZONES, MEMBERS) == set()
    assert moved([BEFORE, middle], BEFORE, ZONES, MEMBERS) == {"p2", "p3"}


def test_without_eligible_zones_nothing_moves() -> None:
    assert moved([BEFORE], spread({}, {}), frozenset(), MEMBERS) == set()


# ---- against a recompute from scratch ----------------------------------------------------

POLICY = {
    "metadata": {"name": "zones", "uid": "p1", "generation": 1},
    "spec": {
        "podSelector": {"matchLabels": {"app": "web"}},
        "deletionCost": {
            "bucket": 1,
            "signals": [{"type": "ZoneBalance", "zoneBalance": {"pointsPerExcessPod": -100}}],
        },
    },
}


def node(name: str, zone: str, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(serial: int, rs: str, node_name: str | None, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{rs}-{serial}",
            "namespace": "ns",
            "uid": f"u{serial}",
            "labels": {"app": "web"},
            # Many pods share a second, as a burst of creates does.
            "creationTimestamp": f"2026-12-07T10:{serial // 600:02d}:{serial // 10 % 60:02d}Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "uid": rs, "controller": True}],
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def final(view: ClusterView, uid: str) -> int | None:
    decision = decisions.pod_cost(view, view.pods[uid], NOW).decision
    return decision.final if decision is not None else None


def fresh(nodes: dict[str, dict[str, Any]], pods: dict[str, dict[str, Any]]) -> dict[str, Any]:
    view = ClusterView()
    view.upsert_policy(POLICY)
    for body in nodes.values():
        view.upsert_node(body)
    for body in pods.values():
        view.upsert_pod(body)
    return {uid: final(view, uid) for uid in view.pods}


@pytest.mark.parametrize("seed", range(12))
def test_planning_only_what_moved_leaves_every_cost_as_a_recompute_would(seed: int) -> None:
    """Creates, deletes, pods going pending or finishing, nodes going NotReady, and plans
    made between passes (as the cost writer's re-plan does): after every pass, each pod's
    last planned cost is what a fresh view of the same objects gives it."""
    rng = random.Random(seed)
    nodes = {f"n{i}": node(f"n{i}", "abc"[i % 3]) for i in range(6)}
    view, dirty = ClusterView(), Dirty()
    view.upsert_policy(POLICY)
    for body in nodes.values():
        view.upsert_node(body)
    pods: dict[str, dict[str, Any]] = {}
    planned: dict[str, int | None] = {}
    serial = 0
    for step in range(300):
        roll = rng.random()
        if roll < 0.45 or not pods:
            serial += 1
            body = pod(serial, rng.choice(["rs1", "rs2"]), rng.choice(sorted(nodes)))
            pods[body["metadata"]["uid"]] = body
            _, affected = view.upsert_pod(body)
        elif roll < 0.8:
            uid = rng.choice(sorted(pods))
            del pods[uid]
            affected = view.remove_pod(uid)
        elif roll < 0.92:
            uid = rng.choice(sorted(pods))
            old = pods[uid]
            phase = rng.choice(["Pending", "Succeeded", "Running"])
            nodename = None if phase == "Pending" else old["spec"]["nodeName"] or "n0"
            pods[uid] = pod(int(uid[1:]), old["metadata"]["name"].split("-")[0], nodename, phase)
            _, affected = view.upsert_pod(pods[uid])
        else:
            name = rng.choice(sorted(nodes))
            nodes[name] = node(name, "abc"[int(name[1:]) % 3], ready=rng.random() < 0.6)
            _, affected = view.upsert_node(nodes[name])
        dirty.add(affected)
        if rng.random() < 0.2 and view.pods:
            # A plan between passes reads whatever spread the view holds now.
            uid = rng.choice(sorted(view.pods))
            planned[uid] = final(view, uid)
        if rng.random() < 0.4:
            taken = dirty.take_pods(view)
            for uid in taken:
                if uid in view.pods:
                    planned[uid] = final(view, uid)
            expected = fresh(nodes, pods)
            got = {uid: planned.get(uid) for uid in view.pods}
            assert got == expected, f"seed {seed}, step {step}"


def test_a_create_in_a_balanced_replicaset_replans_the_new_pod_alone() -> None:
    view, dirty = ClusterView(), Dirty()
    view.upsert_policy(POLICY)
    # A node each, so that NodeConsolidation's ripple (the pods of the same node) adds none.
    for i in range(31):
        view.upsert_node(node(f"n{i}", "abc"[i % 3]))
    for serial in range(30):
        view.upsert_pod(pod(serial, "rs1", f"n{serial}"))
    for uid in dirty.take_pods(view):
        final(view, uid)
    _, affected = view.upsert_pod(pod(30, "rs1", "n30"))
    dirty.add(affected)
    assert dirty.take_pods(view) == {"u30"}
    assert final(view, "u30") == -100  # the one pod above the least-filled zone
    # Its first-placed peer in zone a goes: the pods after it in a move down a place, and
    # zone a is back to the least: only the newest in a, which was above it, moves.
    dirty.add(view.remove_pod("u0"))
    assert dirty.take_pods(view) == {"u30"}
    assert final(view, "u30") == 0
