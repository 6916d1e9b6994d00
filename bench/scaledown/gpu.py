"""B5g: a GPU inference scale-down, decided by the real ReplicaSet controller.

16 nodes of 8 GPUs. Some already run other GPU jobs (bare pods, not ReplicaSet-owned) that
need little CPU; others run CPU-heavy work with no GPU. An inference Deployment of 64
one-GPU replicas is spread over them (per-node pod capacity pins how many land where, so
every case starts from the same placement) and scaled to 32, three times, a lane each
(bench.lanes): with no policy, with NodeConsolidation measuring CPU (today's default), and
measuring nvidia.com/gpu.

Counted are the nodes left with no GPU in use, against the offline greedy ideal over the
nodes that run no other GPU job. A Deployment's replicas share one template, so CPU fill
and GPU fill disagree through the other work on each node rather than per replica.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

from bench import fleet
from bench.lanes import Figures, compare, medians, ratio, run_in_turn, summarise
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
from schedpolicy.core.wellknown import COST_ANNOTATION

GPU = "nvidia.com/gpu"
NODES, GPUS_PER_NODE, REPLICAS, TARGET = 16, 8, 64, 32
REPLICA_CPU = 4


def layout(rng: random.Random) -> list[dict[str, int]]:
    """Per node: GPUs and CPU of other work, and how many replicas it takes (at least 1)."""
    nodes = [{"other_gpus": 0, "other_cpu": 0, "replicas": 1} for _ in range(NODES)]
    order = list(range(NODES))
    rng.shuffle(order)
    for i in order[:5]:  # GPU jobs that need little CPU
        nodes[i].update(other_gpus=rng.randint(2, 5), other_cpu=2)
    for i in order[5:10]:  # CPU-heavy work with no GPU: high CPU fill, GPUs free
        nodes[i].update(other_cpu=rng.randint(48, 72))
    cap = [
        min(GPUS_PER_NODE - n["other_gpus"], (96 - n["other_cpu"]) // REPLICA_CPU) for n in nodes
    ]
    left = REPLICAS - NODES
    while left:
        i = rng.randrange(NODES)
        if nodes[i]["replicas"] < cap[i]:
            nodes[i]["replicas"] += 1
            left -= 1
    return nodes


def gpus_in_use(cluster: LocalCluster) -> Counter[str]:
    used: Counter[str] = Counter()
    for p in fleet.pods(cluster, NAMESPACE, "bench-gpu in (other,serve)"):
        if p["metadata"].get("deletionTimestamp") or not p["spec"].get("nodeName"):
            continue
        for c in p["spec"]["containers"]:
            limits = (c.get("resources") or {}).get("limits") or {}
            used[p["spec"]["nodeName"]] += int(limits.get(GPU, "0"))
    return used


def settled(cluster: LocalCluster) -> bool:
    """Every replica costed, and the replicas of each node costed alike (their fill)."""
    by_node: dict[str, set[str]] = {}
    for p in fleet.pods(cluster, NAMESPACE, "app=serve"):
        cost = (p["metadata"].get("annotations") or {}).get(COST_ANNOTATION)
        if cost is None:
            return False
        by_node.setdefault(p["spec"]["nodeName"], set()).add(cost)
    return bool(by_node) and all(len(c) == 1 for c in by_node.values())


def consolidation_policy(resources: list[str]) -> dict[str, Any]:
    return policy(
        "bench-gpu-fill",
        {
            "bucket": 1,
            "max": 2**30,
            "minUpdateIntervalSeconds": 0,
            "signals": [
                {
                    "type": "NodeConsolidation",
                    "nodeConsolidation": {"points": 100000, "resources": resources},
                }
            ],
        },
    )


def create_fleet(cluster: LocalCluster, shape: list[dict[str, int]]) -> list[FakeNode]:
    nodes = []
    for i, n in enumerate(shape):
        # Exactly as many pod slots as the node is meant to hold: the scheduler has no choice.
        other = 1 if n["other_gpus"] or n["other_cpu"] else 0
        res = {"cpu": "96", "memory": "768Gi", GPU: str(GPUS_PER_NODE)}
        res["pods"] = str(n["replicas"] + other)
        nodes.append(
            FakeNode(
                f"gpu-scaledown-{i:02d}",
                fleet.ZONES[i % len(fleet.ZONES)],
                "us-east-1",
                "p4d.24xlarge",
                res,
                res,
                {"bench": "gpu-scaledown"},
            )
        )
    cluster.create_nodes(nodes, timeout=120)
    jobs = []
    for node, n in zip(nodes, shape, strict=True):
        if not (n["other_gpus"] or n["other_cpu"]):
            continue
        requests = {"cpu": str(n["other_cpu"])}
        limits = {}
        if n["other_gpus"]:
            requests[GPU] = limits[GPU] = str(n["other_gpus"])
        labels = {"app": "other", "bench-gpu": "other"}
        jobs.append(other_work(node.name, labels, {"requests": requests, "limits": limits}))
    fleet.create_in_batches(cluster, jobs)
    return nodes


def serve(cluster: LocalCluster) -> None:
    """The inference Deployment, at full size."""
    doc = fleet.deployment("serve", NAMESPACE, REPLICAS, {"bench": "gpu-scaledown"}, cpu="4")
    template = doc["spec"]["template"]
    template["metadata"]["labels"]["bench-gpu"] = "serve"
    template["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    cluster.kubectl("create", "-f", "-", objects=[doc])


def scale_down(nodes: list[FakeNode], shape: list[dict[str, int]]) -> ScaleDown:
    """The three lanes: no policy, CPU fill, GPU fill; each counts the GPU nodes freed."""
    wanted = {n.name: s["replicas"] for n, s in zip(nodes, shape, strict=True)}

    def check(before: Pods) -> None:
        placed = Counter(p["spec"]["nodeName"] for p in before)
        assert placed == wanted, (placed, wanted)

    def measure(cluster: LocalCluster, before: Pods, after: Pods) -> Figures:
        used = gpus_in_use(cluster)
        return {"freed": sum(1 for n in nodes if used[n.name] == 0)}

    lanes = {
        "no_policy": None,
        "cpu_fill": consolidation_policy(["cpu"]),
        "gpu_fill": consolidation_policy([GPU]),
    }
    return ScaleDown("serve", REPLICAS, TARGET, lanes, check, measure, costed=settled)


def run_b5g(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    # B5 makes the same namespace (its helpers and policies are scoped to it).
    if not cluster.kubectl("get", "namespace", NAMESPACE, "--ignore-not-found", "-o", "name"):
        fleet.namespace(cluster, NAMESPACE)
    rng = random.Random(scale.gpu_seed)
    shape = layout(rng)
    nodes = create_fleet(cluster, shape)
    serve(cluster)
    operator = controller(cluster, metrics=False)
    operator.wait_for_log("view synced", timeout=300)
    try:
        runs = run_in_turn(scale_down(nodes, shape).lanes(), scale.repeats, cluster)
    finally:
        operator.stop()
        cluster.kubectl("delete", "deployment", "serve", "-n", NAMESPACE, check=False)
    freed = {case: medians(lane)["freed"] for case, lane in runs.items()}
    freeable = Counter(
        {n.name: s["replicas"] for n, s in zip(nodes, shape, strict=True) if not s["other_gpus"]}
    )
    ideal = greedy_ideal(freeable, REPLICAS - TARGET)
    spreads = summarise(runs, ["freed"])
    return {
        "name": "B5g GPU scale-down",
        "scale": scale.name,
        "nodes": NODES,
        "gpus_per_node": GPUS_PER_NODE,
        "replicas": [REPLICAS, TARGET],
        "layout": shape,
        "freed": {**freed, "ideal": ideal},
        "ratio": {k: ratio(v, ideal) for k, v in freed.items()},
        "goal": "GPU fill >= 0.9 of ideal, and strictly more freed nodes than CPU fill",
        "repeats": scale.repeats,
        "spread": spreads,
        "compared": {
            "gpu_fill_vs_cpu_fill": compare(spreads["gpu_fill"], spreads["cpu_fill"], ["freed"]),
            "gpu_fill_vs_no_policy": compare(spreads["gpu_fill"], spreads["no_policy"], ["freed"]),
        },
    }
