"""B4: how well GPUs are packed: the chart's schedpolicy-scheduler profile against the default
profile, both the real kube-scheduler, on the same seeded stream of GPU pods, and both against
the first-fit-decreasing bound computed offline. Each profile is a lane (bench.lanes), taken
in turn on the same nodes."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import fleet
from bench.lanes import Lane, compare, medians, ratio, run_in_turn, summarise
from bench.packing import churn_model
from bench.scale import Scale
from localcluster import LocalCluster

NAMESPACE = "bench-packing"
GPUS_PER_NODE = 8
SIZES, WEIGHTS = (1, 2, 4, 8), (0.4, 0.3, 0.2, 0.1)
FILL = 0.8  # of all GPUs requested
OUTCOME = ("free_nodes", "placeable_8gpu_pods", "pending_pods")
PROFILES = {"schedpolicy": "schedpolicy-scheduler", "default": "default-scheduler"}


def gpu_stream(seed: int, capacity: int) -> list[int]:
    rng = random.Random(seed)
    sizes: list[int] = []
    while sum(sizes) < FILL * capacity:
        sizes.append(rng.choices(SIZES, WEIGHTS)[0])
    return sizes


def first_fit_decreasing(sizes: list[int], nodes: int) -> dict[str, int]:
    repack = churn_model.first_fit_decreasing(sizes, [GPUS_PER_NODE] * nodes)
    return outcome(list(repack.free), repack.unplaced)


def outcome(free: list[int], pending: int) -> dict[str, int]:
    return {
        "free_nodes": sum(1 for f in free if f == GPUS_PER_NODE),
        "placeable_8gpu_pods": sum(f // 8 for f in free),
        "pending_pods": pending,
    }


def pod(name: str, gpus: int, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "gpu-stream"}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"bench": "packing"},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": fleet.PAUSE,
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus)},
                        "requests": {"cpu": "10m"},
                    },
                }
            ],
        },
    }


def settled(
    cluster: LocalCluster,
    count: int,
    namespace: str = NAMESPACE,
    selector: str = "app=gpu-stream",
) -> list[dict[str, Any]] | None:
    """The stream's pods, once each is bound or marked unschedulable."""
    pods = fleet.pods(cluster, namespace, selector)
    if len(pods) != count:
        return None
    decided = all(
        p["spec"].get("nodeName")
        or any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for c in p.get("status", {}).get("conditions", [])
        )
        for p in pods
    )
    return pods if decided else None


def place(
    cluster: LocalCluster, sizes: list[int], scheduler: str, nodes: list[str]
) -> dict[str, int]:
    docs = [pod(f"g{i:04d}", size, scheduler) for i, size in enumerate(sizes)]
    fleet.create_in_batches(cluster, docs, batch=100)
    fleet.wait_for(lambda: settled(cluster, len(sizes)), f"{scheduler} to place the stream", 600, 2)
    time.sleep(5)  # let a retry of the unschedulable ones happen
    pods = settled(cluster, len(sizes)) or []
    used: Counter[str] = Counter()
    pending = 0
    for p in pods:
        gpus = int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        if p["spec"].get("nodeName"):
            used[p["spec"]["nodeName"]] += gpus
        else:
            pending += 1
    cluster.kubectl(
        "delete",
        "pods",
        "-l",
        "app=gpu-stream",
        "-n",
        NAMESPACE,
        "--grace-period=0",
        "--wait=true",
        "--timeout=300s",
    )
    return outcome([GPUS_PER_NODE - used[n] for n in nodes], pending)


def described(scale: Scale, sizes: list[int]) -> dict[str, Any]:
    """The stream and its nodes, as B4's and B4-DRA's results name them."""
    return {
        "scale": scale.name,
        "nodes": scale.gpu_nodes,
        "pods": len(sizes),
        "gpus_requested": sum(sizes),
        "seed": scale.gpu_seed,
    }


def profile_lane(name: str, scheduler: str, sizes: list[int], nodes: list[str]) -> Lane:
    """The stream through one profile of the real kube-scheduler."""
    return Lane(name, lambda cluster, repeat: place(cluster, sizes, scheduler, nodes))


def run_b4(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    nodes = fleet.fake_nodes("packing", scale.gpu_nodes, cpu="96", gpus=GPUS_PER_NODE)
    cluster.create_nodes(nodes, timeout=300)
    fleet.namespace(cluster, NAMESPACE)
    names = [n.name for n in nodes]
    sizes = gpu_stream(scale.gpu_seed, scale.gpu_nodes * GPUS_PER_NODE)
    bound = first_fit_decreasing(sizes, scale.gpu_nodes)
    lanes = [profile_lane(name, sched, sizes, names) for name, sched in PROFILES.items()]
    runs = run_in_turn(lanes, scale.repeats, cluster)
    ours, default = medians(runs["schedpolicy"]), medians(runs["default"])
    spreads = summarise(runs, OUTCOME)
    return {
        "name": "B4 GPU packing",
        **described(scale, sizes),
        "schedpolicy_profile": ours,
        "default_profile": default,
        "ffd_bound": bound,
        "ratio": ratio(ours["free_nodes"], bound["free_nodes"]),
        "default_ratio": ratio(default["free_nodes"], bound["free_nodes"]),
        "goal": "free nodes >= 95% of the FFD bound, and more than the default profile",
        "repeats": scale.repeats,
        "spread": spreads,
        "compared": {
            "schedpolicy_vs_default": compare(spreads["schedpolicy"], spreads["default"], OUTCOME)
        },
    }
