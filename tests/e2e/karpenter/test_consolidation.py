"""Our deletion costs steer how Karpenter removes nodes: a scale-down empties the spot nodes
and Karpenter deletes exactly their NodeClaims, and Karpenter consolidates two underused nodes
in the order the policy says."""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import pytest

from localcluster import LocalCluster, audit
from localcluster.karpenter import CAPACITY_TYPE, NODEPOOL_LABEL
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.wellknown import COST_ANNOTATION, KARPENTER_COST_ANNOTATION
from tests.e2e.karpenter.conftest import (
    INSTANCE_TYPE,
    KARPENTER_USER,
    SPOT_FIRST,
    annotation,
    claims_of,
    deployment,
    node_claims,
    nodes,
    pods,
    running_pods,
)
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import apply, get_json, namespace_policy

pytestmark = pytest.mark.e2e


def test_a_scale_down_by_our_costs_empties_spot_nodes_and_karpenter_removes_exactly_those(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    """A spot-first policy beside Karpenter: scaling the Deployment down deletes the pods on
    spot nodes, as our costs and the Karpenter-visible ones say, and Karpenter then deletes
    exactly those nodes' NodeClaims, never one that still runs pods."""
    # Two pods fit on a c5.xlarge (3.9 CPUs once Karpenter's overhead is taken); the spread
    # over capacity types makes Karpenter launch spot and on-demand nodes alike. The pods
    # may not be disrupted, so the only nodes Karpenter can remove are the ones the
    # ReplicaSet controller empties.
    apply(kcluster, namespace_policy(f"spot-first-{ns}", ns, deletionCost=SPOT_FIRST))
    doc = deployment(
        "app",
        4,
        node_selector={INSTANCE_TYPE: "c5.xlarge", NODEPOOL_LABEL: "cpu"},
        spread_over=CAPACITY_TYPE,
        annotations={"karpenter.sh/do-not-disrupt": "true"},
    )
    kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[doc])
    running_pods(kcluster, ns, "app", 4)

    def costed() -> list[dict[str, Any]] | None:
        found = pods(kcluster, ns, "app")
        labels = {n: v["metadata"]["labels"] for n, v in nodes(kcluster).items()}
        want = {"spot": ("-500", str(500 * 2**19)), "on-demand": ("0", str(1000 * 2**19))}
        ok = all(
            (annotation(p, COST_ANNOTATION), annotation(p, KARPENTER_COST_ANNOTATION))
            == want[labels[p["spec"]["nodeName"]][CAPACITY_TYPE]]
            for p in found
        )
        return found if ok else None

    before = wait_until(costed, within=60, what="both costs on every pod")
    node_of = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in before}
    capacity = {
        n: nodes(kcluster)[n]["metadata"]["labels"][CAPACITY_TYPE] for n in node_of.values()
    }
    spot_nodes = {n for n, c in capacity.items() if c == "spot"}
    on_demand_nodes = set(capacity) - spot_nodes
    assert spot_nodes
    assert on_demand_nodes
    claims = claims_of(kcluster, spot_nodes)
    spot_claims = {claims[n]["metadata"]["name"] for n in spot_nodes}

    kcluster.kubectl("scale", "-n", ns, "deployment/app", "--replicas=2")
    survivors = running_pods(kcluster, ns, "app", 2)

    # The ReplicaSet controller deleted the spot pods, as their costs said.
    assert {capacity[p["spec"]["nodeName"]] for p in survivors} == {"on-demand"}

    def spot_claims_gone() -> bool:
        left = {c["metadata"]["name"] for c in get_json(kcluster, "nodeclaims")["items"]}
        return not (spot_claims & left)

    wait_until(spot_claims_gone, within=120, what=f"Karpenter to delete NodeClaims {spot_claims}")
    kept = node_claims(kcluster)
    assert on_demand_nodes <= set(kept), "Karpenter removed a node that still runs pods"
    deleted = deleted_node_claims(kcluster)
    assert spot_claims <= deleted
    assert not deleted & {kept[n]["metadata"]["name"] for n in on_demand_nodes}


def deleted_node_claims(cluster: LocalCluster) -> set[str]:
    """NodeClaims Karpenter deleted, from the audit log."""
    return {
        e.name
        for e in audit.writes_by(cluster.audit_log, KARPENTER_USER)
        if e.resource == "nodeclaims" and e.verb == "delete" and e.code < 300
    }


# Karpenter v1.15 consolidates the candidate with the highest price / (1 + the sum of its
# pods' disruption costs) first (notes/karpenter-disruption.md). Unweighted, an on-demand
# c5.xlarge (0.170 $/h) goes before a spot one (0.068): on-demand first is its default, and
# a policy confirms it. Spot first needs the on-demand pod's cost above 2.5 times the spot
# one's: the policy's whole range does it (node weights 2 against 10).
ORDER_POLICIES = {
    "spot": {
        "signals": [{"type": "CapacityType", "capacityType": {"spot": -1000, "onDemand": 1000}}],
        "karpenterDisruptionCost": {},
    },
    "on-demand": {
        "signals": [{"type": "CapacityType", "capacityType": {"spot": 1000, "onDemand": -1000}}],
        "karpenterDisruptionCost": {},
    },
}
# `make test` runs each direction once; the acceptance's ten of ten,
# SCHEDPOLICY_CONSOLIDATION_RUNS=10 (docs/deletion-cost.md).
ORDER_RUNS = int(os.environ.get("SCHEDPOLICY_CONSOLIDATION_RUNS", "1"))
# Karpenter keeps a node it nominated for a pending pod out of consolidation this long.
NOMINATION_WINDOW = 10


@pytest.mark.parametrize("run", range(ORDER_RUNS))
@pytest.mark.parametrize("first", ["spot", "on-demand"])
def test_karpenter_consolidates_in_the_order_the_policy_says(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str, first: str, run: int
) -> None:
    """A spot and an on-demand node with one pod each, in a NodePool with no room for a
    third node: Karpenter can remove either and move its pod to the other. Under a
    spot-first policy it removes the spot node; under an on-demand-first one, the on-demand
    node. Consolidation is let loose only once both nodes are its candidates: before, a
    node Karpenter launched for a pending pod, or one not yet consolidatable, is not one,
    and the other would go whatever the costs say."""
    name = f"order-{uuid.uuid4().hex[:6]}"
    apply(kcluster, ordering_pool(name, ["spot"]))
    in_pool = {NODEPOOL_LABEL: name}
    try:
        apply(kcluster, namespace_policy(f"first-{ns}", ns, deletionCost=ORDER_POLICIES[first]))
        spot, on_demand = two_nodes(kcluster, ns, name, in_pool)
        wait_until(
            lambda: all(
                annotation(p, KARPENTER_COST_ANNOTATION)
                for app in ("a", "b")
                for p in pods(kcluster, ns, app)
            ),
            what="Karpenter-visible costs on both pods",
        )
        time.sleep(NOMINATION_WINDOW + 1)
        # Both consolidatable before any may go: consolidateAfter 0 with a budget of none.
        set_disruption(kcluster, name, "0s", "0")
        wait_until(
            lambda: consolidatable(kcluster, {spot, on_demand}),
            within=60,
            what="both NodeClaims Consolidatable",
        )
        set_disruption(kcluster, name, "0s", "100%")
        wait_until(
            lambda: not {spot, on_demand} <= set(nodes(kcluster)),
            within=180,
            what="Karpenter to consolidate one of the two nodes",
        )
        left = set(nodes(kcluster))
        gone, kept = (spot, on_demand) if first == "spot" else (on_demand, spot)
        assert gone not in left, f"Karpenter removed the {first} node last"
        assert kept in left
    finally:
        for app in ("a", "b", "blocker"):
            kcluster.kubectl("delete", "-n", ns, "deployment", app, "--ignore-not-found")
        kcluster.kubectl("delete", "nodepool", name, "--ignore-not-found", "--wait=false")


def two_nodes(
    cluster: LocalCluster, ns: str, pool: str, in_pool: dict[str, str]
) -> tuple[str, str]:
    """`a` on a spot node and `b` on an on-demand node of `pool`, each of which could hold
    both. A blocker fills the spot node while the pool may launch on-demand only, for `b`;
    then the pool takes both capacity types again and the blocker goes."""
    launch(cluster, ns, deployment("a", 1, node_selector=in_pool), "a")
    spot = pods(cluster, ns, "a")[0]["spec"]["nodeName"]
    # KWOK's nodes carry no kubernetes.io/hostname label: pinned by name.
    blocker = deployment("blocker", 1, cpu="2000m")
    blocker["spec"]["template"]["spec"]["affinity"] = on_node(spot)
    launch(cluster, ns, blocker, "blocker")
    capacity_types(cluster, pool, ["on-demand"])
    launch(cluster, ns, deployment("b", 1, node_selector=in_pool), "b")
    on_demand = pods(cluster, ns, "b")[0]["spec"]["nodeName"]
    capacity_types(cluster, pool, ["spot", "on-demand"])
    labels = {n: nodes(cluster)[n]["metadata"]["labels"][CAPACITY_TYPE] for n in (spot, on_demand)}
    assert labels == {spot: "spot", on_demand: "on-demand"}, labels
    cluster.kubectl("delete", "-n", ns, "deployment", "blocker", "--wait=true")
    wait_until(lambda: not pods(cluster, ns, "blocker"), what="the blocker gone")
    return spot, on_demand


def set_disruption(cluster: LocalCluster, pool: str, after: str, budget: str) -> None:
    budgets = [
        {"nodes": budget, "reasons": ["Underutilized", "Empty"]},
        {"nodes": "0", "reasons": ["Drifted"]},
    ]
    patch = {"spec": {"disruption": {"consolidateAfter": after, "budgets": budgets}}}
    cluster.kubectl("patch", "nodepool", pool, "--type=merge", "-p", json.dumps(patch))


def consolidatable(cluster: LocalCluster, names: set[str]) -> bool:
    claims = node_claims(cluster)
    return all(
        any(
            c["type"] == "Consolidatable" and c["status"] == "True"
            for c in claims[n].get("status", {}).get("conditions", [])
        )
        for n in names
        if n in claims
    ) and names <= set(claims)


def capacity_types(cluster: LocalCluster, pool: str, values: list[str]) -> None:
    patch = [
        {
            "op": "replace",
            "path": "/spec/template/spec/requirements/1",
            "value": {"key": CAPACITY_TYPE, "operator": "In", "values": values},
        }
    ]
    cluster.kubectl("patch", "nodepool", pool, "--type=json", "-p", json.dumps(patch))


def launch(cluster: LocalCluster, ns: str, doc: dict[str, Any], app: str) -> None:
    cluster.kubectl("apply", "-n", ns, "-f", "-", objects=[doc])
    running_pods(cluster, ns, app, doc["spec"]["replicas"])


def on_node(name: str) -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def ordering_pool(name: str, capacity: list[str]) -> dict[str, Any]:
    """c5.xlarge only, two at most (a replacement would need a third), no consolidation
    until the test turns it on, and none for drift while the test changes its capacity
    types."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "weight": 90,
            "limits": {"cpu": "8"},
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": INSTANCE_TYPE, "operator": "In", "values": ["c5.xlarge"]},
                        {"key": CAPACITY_TYPE, "operator": "In", "values": capacity},
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "Never",
                "budgets": [
                    {"nodes": "100%", "reasons": ["Underutilized", "Empty"]},
                    {"nodes": "0", "reasons": ["Drifted"]},
                ],
            },
        },
    }
