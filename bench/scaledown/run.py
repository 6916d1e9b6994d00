"""B5: what a scale-down leaves behind, decided by the real ReplicaSet controller.

Consolidation: 200 replicas spread evenly over 50 nodes that also run other work, scaled to
100, without and then with a NodeConsolidation policy (two lanes); counted are the nodes
left with none of the replicas, against the ideal from an offline greedy choice.

Zones: a Deployment over 3 zones, scaled down without and with a ZoneBalance policy (two
lanes); reported is the max/min replica count over the zones afterwards.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

from bench import fleet
from bench.lanes import Figures, compare, medians, ratio, rounded, run_in_turn, summarise
from bench.scale import Scale
from bench.scaledown.deployment import (
    NAMESPACE,
    Pods,
    ScaleDown,
    greedy_ideal,
    other_work,
    policy,
)
from localcluster import LocalCluster
from localcluster.operator_process import controller
from localcluster.topology import FakeNode

ZONES = {"us-east-1a": 30, "us-east-1b": 20, "us-east-1c": 10}


def consolidation_policy() -> dict[str, Any]:
    return policy(
        "bench-consolidate",
        {
            # Fill x 100000 keeps every node's cost distinct; max makes room.
            "bucket": 1,
            "max": 2**30,
            "minUpdateIntervalSeconds": 0,
            "signals": [{"type": "NodeConsolidation", "nodeConsolidation": {"points": 100000}}],
        },
    )


def spread_fleet(cluster: LocalCluster, scale: Scale, rng: random.Random) -> list[FakeNode]:
    """The nodes, other work on every one, and the Deployment spread evenly over them."""
    nodes = fleet.fake_nodes("scaledown", scale.scale_nodes, cpu="8", pods="40")
    cluster.create_nodes(nodes, timeout=300)
    # Other work on every node, with seeded random CPU.
    fleet.create_in_batches(
        cluster,
        [
            other_work(
                n.name, {"app": "other"}, {"requests": {"cpu": f"{rng.randint(5, 50) * 100}m"}}
            )
            for n in nodes
        ],
    )
    doc = fleet.deployment(
        "spread", NAMESPACE, scale.scale_replicas, {"bench": "scaledown"}, cpu="50m"
    )
    doc["spec"]["template"]["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}},
        }
    ]
    cluster.kubectl("create", "-f", "-", objects=[doc])
    return nodes


def consolidation(
    cluster: LocalCluster, scale: Scale, rng: random.Random
) -> dict[str, list[Figures]]:
    nodes = spread_fleet(cluster, scale, rng)
    per_node = scale.scale_replicas // scale.scale_nodes
    remove = scale.scale_replicas - scale.scale_replicas // 2

    def check(before: Pods) -> None:
        counts = Counter(p["spec"]["nodeName"] for p in before)
        assert set(counts.values()) == {per_node}, counts

    def measure(cluster: LocalCluster, before: Pods, after: Pods) -> Figures:
        left = Counter(p["spec"]["nodeName"] for p in after)
        return {
            "emptied": sum(1 for n in nodes if left[n.name] == 0),
            "ideal": greedy_ideal(Counter(p["spec"]["nodeName"] for p in before), remove),
        }

    lanes = {"without_policy": None, "with_policy": consolidation_policy()}
    down = ScaleDown(
        "spread", scale.scale_replicas, scale.scale_replicas // 2, lanes, check, measure
    )
    runs = run_in_turn(down.lanes(), scale.repeats, cluster)
    cluster.kubectl("delete", "deployment", "spread", "-n", NAMESPACE)
    return runs


def zone_skew(cluster: LocalCluster, scale: Scale) -> dict[str, list[Figures]]:
    nodes = [
        FakeNode(
            f"zone-{zone}",
            zone,
            "us-east-1",
            "m5.4xlarge",
            {"cpu": "64", "memory": "64Gi", "pods": str(pods)},
            {"cpu": "64", "memory": "64Gi", "pods": str(pods)},
            {"bench": "zones"},
        )
        for zone, pods in ZONES.items()
    ]
    cluster.create_nodes(nodes, timeout=120)
    zone_of = {n.name: n.zone for n in nodes}
    total = sum(ZONES.values())
    cluster.kubectl(
        "create",
        "-f",
        "-",
        objects=[fleet.deployment("zonal", NAMESPACE, total, {"bench": "zones"}, cpu="10m")],
    )

    def check(before: Pods) -> None:
        assert Counter(zone_of[p["spec"]["nodeName"]] for p in before) == Counter(ZONES)

    def measure(cluster: LocalCluster, before: Pods, after: Pods) -> Figures:
        counts = Counter(zone_of[p["spec"]["nodeName"]] for p in after)
        per_zone = [counts.get(z, 0) for z in ZONES]
        return {
            "per_zone": per_zone,
            "max_over_min": round(max(per_zone) / min(per_zone), 2) if min(per_zone) else None,
        }

    balance = policy(
        "bench-zones", {"minUpdateIntervalSeconds": 0, "signals": [{"type": "ZoneBalance"}]}
    )
    lanes = {"without_policy": None, "with_policy": balance}
    return run_in_turn(
        ScaleDown("zonal", total, total // 2, lanes, check, measure).lanes(), scale.repeats, cluster
    )


def run_b5(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    fleet.namespace(cluster, NAMESPACE)
    operator = controller(cluster, metrics=False)
    operator.wait_for_log("view synced", timeout=300)
    try:
        rng = random.Random(scale.gpu_seed)
        node_runs = consolidation(cluster, scale, rng)
        zone_runs = zone_skew(cluster, scale)
    finally:
        operator.stop()
    without, with_ = medians(node_runs["without_policy"]), medians(node_runs["with_policy"])
    nodes = {
        "without_policy": without["emptied"],
        "ideal": with_["ideal"],
        "with_policy": with_["emptied"],
    }
    emptied = summarise(node_runs, ["emptied"])
    return {
        "name": "B5 scale-down",
        "scale": scale.name,
        "replicas": scale.scale_replicas,
        "nodes": scale.scale_nodes,
        "nodes_emptied": nodes,
        "ratio": ratio(nodes["with_policy"], nodes["ideal"]),
        "zones": {name: medians(runs) for name, runs in zone_runs.items()},
        "goal": "nodes emptied >= 90% of ideal with the policy",
        "repeats": scale.repeats,
        "spread": {
            "nodes_emptied": emptied,
            "zones": rounded(summarise(zone_runs, ["max_over_min"]), 2),
        },
        "compared": {
            "nodes_emptied": compare(emptied["with_policy"], emptied["without_policy"], ["emptied"])
        },
    }
