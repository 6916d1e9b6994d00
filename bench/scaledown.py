"""B5: what a scale-down leaves behind, decided by the real ReplicaSet controller.

Consolidation: 200 replicas spread evenly over 50 nodes that also run other work, scaled to
100, without and then with a NodeConsolidation policy; counted are the nodes left with none
of the replicas, against the ideal from an offline greedy choice.

Zones: a Deployment over 3 zones, scaled down without and with a ZoneBalance policy;
reported is the max/min replica count over the zones afterwards.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import fleet
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.operator_process import controller
from localcluster.topology import FakeNode
from schedpolicy.core.wellknown import COST_ANNOTATION

NAMESPACE = "bench-scaledown"


def greedy_ideal(per_node: Counter[str], remove: int) -> int:
    """Most nodes that removing `remove` replicas can empty: take the smallest nodes first."""
    emptied = 0
    for count in sorted(per_node.values()):
        if count > remove:
            break
        remove -= count
        emptied += 1
    return emptied


def policy(name: str, deletion_cost: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
            "deletionCost": deletion_cost,
        },
    }


def scale_to(cluster: LocalCluster, name: str, replicas: int) -> list[dict[str, Any]]:
    cluster.kubectl("scale", "deployment", name, "-n", NAMESPACE, f"--replicas={replicas}")

    def done() -> list[dict[str, Any]] | None:
        pods = [
            p
            for p in fleet.pods(cluster, NAMESPACE, f"app={name}")
            if not p["metadata"].get("deletionTimestamp")
        ]
        return pods if len(pods) == replicas and all(fleet.running(p) for p in pods) else None

    return list(fleet.wait_for(done, f"{name} at {replicas} replicas", 300, 1))


def costs_written(cluster: LocalCluster, name: str) -> bool:
    pods = fleet.pods(cluster, NAMESPACE, f"app={name}")
    return bool(pods) and all(
        COST_ANNOTATION in (p["metadata"].get("annotations") or {}) for p in pods
    )


def consolidation(cluster: LocalCluster, scale: Scale, rng: random.Random) -> dict[str, Any]:
    nodes = fleet.fake_nodes("scaledown", scale.scale_nodes, cpu="8", pods="40")
    cluster.create_nodes(nodes, timeout=300)
    # Other work on every node: bare pods bound directly, with seeded random CPU.
    others = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"other-{n.name}",
                "namespace": NAMESPACE,
                "labels": {"app": "other"},
            },
            "spec": {
                "nodeName": n.name,
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "c",
                        "image": fleet.PAUSE,
                        "resources": {"requests": {"cpu": f"{rng.randint(5, 50) * 100}m"}},
                    }
                ],
            },
        }
        for n in nodes
    ]
    fleet.create_in_batches(cluster, others)
    per_node = scale.scale_replicas // scale.scale_nodes
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
    results: dict[str, Any] = {}
    for label, with_policy in (("without_policy", False), ("with_policy", True)):
        before = scale_to(cluster, "spread", scale.scale_replicas)
        counts = Counter(p["spec"]["nodeName"] for p in before)
        assert set(counts.values()) == {per_node}, counts
        if with_policy:
            cluster.kubectl(
                "apply",
                "-f",
                "-",
                objects=[
                    policy(
                        "bench-consolidate",
                        {
                            # Fill x 100000 keeps every node's cost distinct; max makes room.
                            "bucket": 1,
                            "max": 2**30,
                            "minUpdateIntervalSeconds": 0,
                            "signals": [
                                {
                                    "type": "NodeConsolidation",
                                    "nodeConsolidation": {"points": 100000},
                                }
                            ],
                        },
                    )
                ],
            )
            fleet.wait_for(lambda: costs_written(cluster, "spread"), "consolidation costs", 300, 1)
            time.sleep(3)
        after = scale_to(cluster, "spread", scale.scale_replicas // 2)
        left = Counter(p["spec"]["nodeName"] for p in after)
        results[label] = sum(1 for n in nodes if left[n.name] == 0)
        results["ideal"] = greedy_ideal(counts, scale.scale_replicas - scale.scale_replicas // 2)
    cluster.kubectl("delete", "spol", "bench-consolidate")
    cluster.kubectl("delete", "deployment", "spread", "-n", NAMESPACE)
    return results


def zone_skew(cluster: LocalCluster) -> dict[str, Any]:
    shapes = {"us-east-1a": 30, "us-east-1b": 20, "us-east-1c": 10}
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
        for zone, pods in shapes.items()
    ]
    cluster.create_nodes(nodes, timeout=120)
    zone_of = {n.name: n.zone for n in nodes}
    total = sum(shapes.values())
    cluster.kubectl(
        "create",
        "-f",
        "-",
        objects=[fleet.deployment("zonal", NAMESPACE, total, {"bench": "zones"}, cpu="10m")],
    )
    results: dict[str, Any] = {}
    for label, with_policy in (("without_policy", False), ("with_policy", True)):
        before = scale_to(cluster, "zonal", total)
        assert Counter(zone_of[p["spec"]["nodeName"]] for p in before) == Counter(shapes)
        if with_policy:
            cluster.kubectl(
                "apply",
                "-f",
                "-",
                objects=[
                    policy(
                        "bench-zones",
                        {"minUpdateIntervalSeconds": 0, "signals": [{"type": "ZoneBalance"}]},
                    )
                ],
            )
            fleet.wait_for(lambda: costs_written(cluster, "zonal"), "zone costs", 300, 1)
            time.sleep(3)
        after = scale_to(cluster, "zonal", total // 2)
        counts = Counter(zone_of[p["spec"]["nodeName"]] for p in after)
        per_zone = [counts.get(z, 0) for z in shapes]
        results[label] = {
            "per_zone": per_zone,
            "max_over_min": round(max(per_zone) / min(per_zone), 2) if min(per_zone) else None,
        }
    cluster.kubectl("delete", "spol", "bench-zones")
    return results


def run_b5(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    fleet.namespace(cluster, NAMESPACE)
    operator = controller(cluster, metrics=False)
    operator.wait_for_log("view synced", timeout=300)
    try:
        rng = random.Random(scale.gpu_seed)
        nodes = consolidation(cluster, scale, rng)
        zones = zone_skew(cluster)
    finally:
        operator.stop()
    return {
        "name": "B5 scale-down",
        "scale": scale.name,
        "replicas": scale.scale_replicas,
        "nodes": scale.scale_nodes,
        "nodes_emptied": nodes,
        "ratio": round(nodes["with_policy"] / nodes["ideal"], 3) if nodes["ideal"] else None,
        "zones": zones,
        "goal": "nodes emptied >= 90% of ideal with the policy",
    }
