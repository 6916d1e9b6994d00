"""B6: GPU node-hours on a real trace, with a real Karpenter launching and consolidating.

A window of the Alibaba GPU trace is replayed, time-compressed, into a cluster with no fixed
nodes: Karpenter (its KWOK provider, v1.15) launches GPU nodes from the harness's 4- and
8-GPU instance types when tasks wait, and consolidates them when they empty or fall under-
used. Each task is a one-replica Deployment (a controller-owned pod, which Karpenter may
move), created at the task's arrival and deleted at its end. Three lanes, each on a fresh
cluster with the same trace:

- karpenter-alone: the default scheduler, no policy;
- profile: pods go to the chart's scheduler profile (MostAllocated on nvidia.com/gpu);
- product: the controller and the webhook, with a policy that hints the profile and writes
  GPU-fill deletion costs that Karpenter reads (karpenter.sh/disruption-cost).

Measured from what the apiserver stored, sampled every second: node lifetimes (GPU node-
seconds, GPU-seconds provisioned, dollars at the catalog's prices), when each task's pod was
first bound, and the share of provisioned GPUs no pod holds. The offline bound is the
GPU-seconds the tasks need, packed onto 8-GPU nodes with nothing idle.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import trace
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.binaries import REPO
from localcluster.karpenter import CAPACITY_TYPE, GPU, INSTANCE_TYPE, KarpenterOptions, load_catalog

NAMESPACE = "b6-trace"
SCHEDULER = "schedpolicy-scheduler"
PAUSE = "registry.k8s.io/pause:3.10"
LANES = ("karpenter-alone", "profile", "product")
# A 12-hour window with seven 8-GPU tasks among 88 (ATC '23 trace, default list).
WINDOW_START = 10_850_000
# Karpenter waits this long (replay time) before it consolidates a node.
CONSOLIDATE_AFTER = "10s"
POLICY = {
    "apiVersion": "schedpolicy.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {"name": "b6-gpu"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
        "placement": {"schedulerName": SCHEDULER},
        "deletionCost": {
            "signals": [
                {
                    "type": "NodeConsolidation",
                    "nodeConsolidation": {"resources": [GPU], "points": 1000},
                }
            ],
            "min": 0,
            "max": 1000,
            "karpenterDisruptionCost": {},
        },
    },
}


@dataclass
class Observed:
    """What the sampler saw during one lane."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> first/last, type
    bound: dict[str, float] = field(default_factory=dict)  # task -> replay time first bound
    unallocated: list[tuple[float, float]] = field(default_factory=list)  # (t, share)


def task_doc(task: trace.Task, scheduler: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "task",
                "image": PAUSE,
                "resources": {
                    "requests": {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"},
                    "limits": {GPU: str(task.gpus)},
                },
            }
        ],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    labels = {"b6-task": task.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": task.name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def sample(cluster: LocalCluster, seen: Observed, t: float) -> None:
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    allocatable = 0
    for node in nodes:
        gpus = int(node["status"].get("allocatable", {}).get(GPU, "0"))
        if not gpus:
            continue
        allocatable += gpus
        labels = node["metadata"]["labels"]
        entry = seen.nodes.setdefault(
            node["metadata"]["name"],
            {
                "first": t,
                "gpus": gpus,
                "type": labels.get(INSTANCE_TYPE),
                "capacity": labels.get(CAPACITY_TYPE),
            },
        )
        entry["last"] = t
    pods = json.loads(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))["items"]
    used = 0
    for pod in pods:
        if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        task = pod["metadata"]["labels"]["b6-task"]
        seen.bound.setdefault(task, t)
        used += int(pod["spec"]["containers"][0]["resources"]["limits"][GPU])
    if allocatable:
        seen.unallocated.append((t, (allocatable - used) / allocatable))


def replay(cluster: LocalCluster, window: trace.Window, scheduler: str | None) -> Observed:
    seen = Observed()
    stop = threading.Event()
    t0 = time.monotonic()

    def sampler() -> None:
        while not stop.is_set():
            started = time.monotonic()
            sample(cluster, seen, started - t0)
            stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    events = sorted(
        [(t.start, "create", t) for t in window.tasks]
        + [(t.end, "delete", t) for t in window.tasks],
        key=lambda e: (e[0], e[1] == "create"),
    )
    try:
        i = 0
        while i < len(events):
            due = events[i][0]
            wait = due - (time.monotonic() - t0)
            if wait > 0:
                time.sleep(wait)
            batch = []
            while i < len(events) and events[i][0] <= time.monotonic() - t0:
                batch.append(events[i])
                i += 1
            creates = [task_doc(t, scheduler) for _, kind, t in batch if kind == "create"]
            deletes = [t.name for _, kind, t in batch if kind == "delete"]
            if creates:
                cluster.kubectl("create", "-f", "-", objects=creates)
            if deletes:
                cluster.kubectl("delete", "deployment", "-n", NAMESPACE, "--wait=false", *deletes)
    finally:
        stop.set()
        thread.join()
    return seen


def lane_result(
    name: str, window: trace.Window, seen: Observed, catalog: Any, end: float
) -> dict[str, Any]:
    node_seconds = gpu_seconds = dollars = 0.0
    consolidated = 0
    for node in seen.nodes.values():
        lifetime = min(node["last"], end) - node["first"] + 1.0  # sampled once a second
        node_seconds += lifetime
        gpu_seconds += lifetime * node["gpus"]
        dollars += lifetime / 3600 * catalog.price(node["type"], node["capacity"])
        consolidated += node["last"] < end - 2
    needed = sum(t.gpu_seconds for t in window.tasks)
    pending = [
        seen.bound[t.name] - t.start for t in window.tasks if t.gpus == 8 and t.name in seen.bound
    ]
    shares = [s for t, s in seen.unallocated if t <= end]
    return {
        "lane": name,
        "gpu_node_hours_replay": round(node_seconds / 3600, 4),
        "gpu_node_hours_trace": round(node_seconds * window.compression / 3600, 1),
        "gpu_hours_provisioned_replay": round(gpu_seconds / 3600, 4),
        "dollars_replay": round(dollars, 4),
        "dollars_trace": round(dollars * window.compression, 2),
        "provisioned_over_needed": round(gpu_seconds / needed, 3) if needed else None,
        "pending_8gpu_p50_s": trace.percentile(pending, 50),
        "pending_8gpu_p95_s": trace.percentile(pending, 95),
        "tasks_8gpu_never_bound": sum(
            1 for t in window.tasks if t.gpus == 8 and t.name not in seen.bound
        ),
        "nodes_provisioned": len(seen.nodes),
        "nodes_consolidated": consolidated,
        "node_types": sorted({f"{n['type']}/{n['capacity']}" for n in seen.nodes.values()}),
        "mean_unallocated_share": round(sum(shares) / len(shares), 3) if shares else None,
        "unallocated_over_time": [(round(t, 1), round(s, 3)) for t, s in seen.unallocated],
    }


def run_lane(name: str, window: trace.Window, workdir: Path) -> dict[str, Any]:
    cluster = LocalCluster(workdir)
    print(f"B6 {name}: starting a cluster with Karpenter in {workdir}", flush=True)
    cluster.up(nodes=[], karpenter_options=KarpenterOptions(consolidate_after=CONSOLIDATE_AFTER))
    try:
        cluster.kubectl("create", "namespace", NAMESPACE)
        scheduler = SCHEDULER if name == "profile" else None
        if name == "product":
            cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
            cluster.kubectl(
                "wait", "--for=condition=Established", "crd/schedulingpolicies.schedpolicy.io"
            )
            cluster.start_operator()
            cluster.kubectl("apply", "-f", "-", objects=[POLICY])
        seen = replay(cluster, window, scheduler)
        catalog = load_catalog()
        return lane_result(name, window, seen, catalog, window.replay_seconds)
    finally:
        cluster.down()


def run_b6(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    """`cluster` (the benchmarks' shared one) is not used: every lane needs a cluster of
    Karpenter's nodes only."""
    hours = 12 if scale.name != "small" else 6
    window = trace.load(WINDOW_START, hours * 3600, compression=120)
    lanes = {name: run_lane(name, window, REPO / ".cluster" / f"bench-b6-{name}") for name in LANES}
    alone = lanes["karpenter-alone"]
    needed_hours = sum(t.gpu_seconds for t in window.tasks) / 3600
    result: dict[str, Any] = {
        "name": "B6 GPU node-hours on the Alibaba trace",
        "scale": scale.name,
        "window": window.summary(),
        "peak_gpus_needed": trace.peak_gpus(window.tasks),
        # No placement provisions fewer GPU-hours than the tasks hold; on 8-GPU nodes that
        # is needed / 8 node-hours.
        "lower_bound_gpu_hours_replay": round(needed_hours, 4),
        "lower_bound_8gpu_node_hours_replay": round(needed_hours / 8, 4),
        "lanes": lanes,
        "vs_alone": {
            name: {
                "gpu_node_hours": ratio(
                    lane["gpu_node_hours_replay"], alone["gpu_node_hours_replay"]
                ),
                "dollars": ratio(lane["dollars_replay"], alone["dollars_replay"]),
            }
            for name, lane in lanes.items()
        },
        "vs_bound": {
            name: ratio(lane["gpu_hours_provisioned_replay"], needed_hours)
            for name, lane in lanes.items()
        },
    }
    plot(result, out / "b6-gpu-hours.png")
    return result


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, lane in result["lanes"].items():
        points = lane["unallocated_over_time"]
        left.plot([t for t, _ in points], [s for _, s in points], label=name, linewidth=1)
    left.set_xlabel("replay seconds")
    left.set_ylabel("unallocated share of provisioned GPUs")
    left.set_ylim(0, 1)
    left.legend()
    names = list(result["lanes"])
    hours = [result["lanes"][n]["gpu_hours_provisioned_replay"] for n in names]
    right.bar([*names, "needed (bound)"], [*hours, result["lower_bound_gpu_hours_replay"]])
    right.set_ylabel("GPU-hours provisioned (replay time)")
    fig.suptitle("B6: Alibaba GPU trace through a real Karpenter")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
