"""B4c: GPU packing under churn, through the real kube-scheduler.

Every profile gets its own lane: an identical set of 8-GPU and 4-GPU fake nodes, and the same
seeded stream of GPU jobs (bare pods of 1/2/4/8 GPUs). KWOK completes each pod a lifetime
after it starts (localcluster/stages/pod-lifetime.yaml), so capacity comes and goes. Admission
is closed-loop: a lane's next job is created whenever the GPUs its unfinished jobs ask for
stay within the target load, so every lane runs at the same requested load whatever its
scheduler does with it. All lanes run at the same time, so they share the machine's noise.

After a warm-up of one and a half mean lifetimes, each lane is measured at fixed checkpoints
against an offline first-fit-decreasing repack of the jobs it runs at that moment
(`churn_model.checkpoint`).

The lanes are the chart's schedpolicy-scheduler profile, the cluster's default profile, and
alternatives NodeResourcesFit offers upstream, run as extra profiles of one more
kube-scheduler process built from the chart's own configuration.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import fleet
from bench.churn_model import Job, checkpoint, job_stream, ratio
from bench.scale import Scale
from localcluster import LocalCluster, binaries, chart
from localcluster.topology import FakeNode

NAMESPACE = "bench-churn"
GPU = "nvidia.com/gpu"
LIFETIME = "pod-complete.stage.kwok.x-k8s.io/delay"
LANE_LABEL = "bench-churn"
TARGET_LOAD = 0.9  # the most of a lane's GPUs its unfinished jobs may ask for
CHECKPOINT_EVERY = 10  # seconds
TICK = 1.0
ALTERNATIVES_PROCESS = "b4c-kube-scheduler"
SUCCEEDED = f"/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=status.phase%3DSucceeded"


@dataclass
class Lane:
    """One profile's nodes and its progress through the shared stream."""

    short: str
    scheduler: str
    description: str
    capacities: dict[str, int] = field(default_factory=dict)
    next_job: int = 0
    completed_gpus: int = 0
    alive: set[str] = field(default_factory=set)  # unfinished at the last list
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    demand: list[float] = field(default_factory=list)

    @property
    def capacity(self) -> int:
        return sum(self.capacities.values())


def _fit_args(strategy: dict[str, Any]) -> dict[str, Any]:
    return {"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}


def alternative_profiles() -> list[tuple[str, str, dict[str, Any]]]:
    """(short name, what it is, NodeResourcesFit scoring strategy) for each alternative."""
    light = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    return [
        (
            "gpu10",
            "MostAllocated, cpu 1 / memory 1 / gpu 10 (the chart's default before B4c)",
            {"type": "MostAllocated", "resources": [*light, {"name": GPU, "weight": 10}]},
        ),
        (
            "gpu-only",
            "MostAllocated over nvidia.com/gpu alone",
            {"type": "MostAllocated", "resources": [{"name": GPU, "weight": 1}]},
        ),
        (
            "gpu3",
            "MostAllocated, cpu 1 / memory 1 / gpu 3",
            {"type": "MostAllocated", "resources": [*light, {"name": GPU, "weight": 3}]},
        ),
        (
            "rtcr-convex",
            "RequestedToCapacityRatio, cpu 1 / memory 1 / gpu 10, shape 0→0, 75→2, 100→10",
            {
                "type": "RequestedToCapacityRatio",
                "resources": [*light, {"name": GPU, "weight": 10}],
                "requestedToCapacityRatio": {
                    "shape": [
                        {"utilization": 0, "score": 0},
                        {"utilization": 75, "score": 2},
                        {"utilization": 100, "score": 10},
                    ]
                },
            },
        ),
    ]


def alternatives_config(workdir: Path, kubeconfig: Path) -> Path:
    """The chart's scheduler configuration, one profile per alternative, differing from the
    chart's profile only in NodeResourcesFit's scoring strategy."""
    config = chart.scheduler_config(chart.render("templates/scheduler/configmap.yaml"))
    (base,) = config["profiles"]
    profiles = []
    for short, _, strategy in alternative_profiles():
        profile = copy.deepcopy(base)
        profile["schedulerName"] = f"b4c-{short}"
        profile["pluginConfig"] = [
            _fit_args(strategy) if p["name"] == "NodeResourcesFit" else p
            for p in profile["pluginConfig"]
        ]
        profiles.append(profile)
    config["profiles"] = profiles
    config["leaderElection"] = {"leaderElect": False}
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    path = workdir / "b4c-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_alternatives(cluster: LocalCluster) -> None:
    kubeconfig = cluster.service_account_kubeconfig("schedpolicy-scheduler", "b4c-scheduler")
    config = alternatives_config(cluster.workdir, kubeconfig)
    cluster.supervisor.start(
        ALTERNATIVES_PROCESS,
        [
            str(binaries.path("kube-scheduler")),
            f"--config={config}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--secure-port=0",  # nothing to serve: the lanes' pods show whether it works
        ],
    )


def lanes() -> list[Lane]:
    return [
        Lane("ours", "schedpolicy-scheduler", "schedpolicy-scheduler (the chart's profile)"),
        Lane("default", "default-scheduler", "default profile"),
        *(Lane(short, f"b4c-{short}", what) for short, what, _ in alternative_profiles()),
    ]


def lane_nodes(lane: Lane, eights: int, fours: int) -> list[FakeNode]:
    nodes = []
    for gpus, count, cpu in ((8, eights, "96"), (4, fours, "48")):
        made = fleet.fake_nodes(
            f"churn-{lane.short}-{gpus}g",
            count,
            cpu=cpu,
            gpus=gpus,
            labels={LANE_LABEL: lane.short},
        )
        nodes += made
        lane.capacities.update({n.name: gpus for n in made})
    return nodes


def job_pod(lane: Lane, job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{lane.short}-{job.index:05d}",
            "namespace": NAMESPACE,
            "labels": {"app": "gpu-churn", LANE_LABEL: lane.short},
            "annotations": {LIFETIME: f"{job.lifetime}s"},
        },
        "spec": {
            "schedulerName": lane.scheduler,
            "nodeSelector": {LANE_LABEL: lane.short},
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "job",
                    "image": fleet.PAUSE,
                    "resources": {
                        "requests": {"cpu": str(job.cpu), "memory": "1Gi"},
                        "limits": {GPU: str(job.gpus)},
                    },
                }
            ],
        },
    }


@dataclass(frozen=True)
class PodState:
    name: str
    node: str
    phase: str
    unschedulable: bool


COLUMNS = (
    "NAME:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase,"
    'WHY:.status.conditions[?(@.type=="PodScheduled")].reason'
)


def list_pods(cluster: LocalCluster) -> list[PodState]:
    out = cluster.kubectl(
        "get", "pods", "-n", NAMESPACE, "--no-headers", f"-o=custom-columns={COLUMNS}"
    )
    states = []
    for line in out.splitlines():
        name, node, phase, why = line.split()
        states.append(
            PodState(name, "" if node == "<none>" else node, phase, why == "Unschedulable")
        )
    return states


def gpus_of(name: str, stream: list[Job]) -> int:
    return stream[int(name.rsplit("-", 1)[1])].gpus


def snapshot(lane: Lane, pods: list[PodState], stream: list[Job], t: float) -> dict[str, Any]:
    running: dict[str, list[int]] = {}
    pending: list[int] = []
    for p in pods:
        if p.phase in ("Succeeded", "Failed"):
            continue
        if p.node:
            running.setdefault(p.node, []).append(gpus_of(p.name, stream))
        elif p.unschedulable:
            pending.append(gpus_of(p.name, stream))
    return {"t": round(t), **checkpoint(lane.capacities, running, pending)}


def admit(
    lane: Lane, pods: list[PodState], stream: list[Job]
) -> tuple[list[dict[str, Any]], float]:
    """The lane's next jobs, as many as keep its unfinished jobs within the target load, and
    the load they then ask for."""
    demand = sum(gpus_of(p.name, stream) for p in pods if p.phase not in ("Succeeded", "Failed"))
    docs = []
    while demand + stream[lane.next_job].gpus <= TARGET_LOAD * lane.capacity:
        job = stream[lane.next_job]
        docs.append(job_pod(lane, job))
        demand += job.gpus
        lane.next_job += 1
    return docs, demand / lane.capacity


def count_completions(lane: Lane, pods: list[PodState], stream: list[Job], counted: bool) -> None:
    """A job that was unfinished at the last list and is now Succeeded or gone has finished:
    nothing but the bench deletes these pods, and it deletes only Succeeded ones."""
    alive = {p.name for p in pods if p.phase not in ("Succeeded", "Failed")}
    if counted:
        lane.completed_gpus += sum(gpus_of(name, stream) for name in lane.alive - alive)
    lane.alive = alive


def drive(
    cluster: LocalCluster, all_lanes: list[Lane], stream: list[Job], warm: int, window: int
) -> list[float]:
    """Runs the lanes; returns how long each tick took (a tick far over TICK means the
    driver, not the schedulers, set the pace)."""
    started = time.monotonic()
    next_checkpoint = float(warm)
    ticks: list[float] = []
    while (t := time.monotonic() - started) < warm + window:
        pods = list_pods(cluster)
        by_lane: dict[str, list[PodState]] = {}
        for p in pods:
            by_lane.setdefault(p.name.rsplit("-", 1)[0], []).append(p)
        measuring = t >= next_checkpoint
        creates: list[dict[str, Any]] = []
        for lane in all_lanes:
            mine = by_lane.get(lane.short, [])
            count_completions(lane, mine, stream, counted=t >= warm)
            if measuring:
                lane.checkpoints.append(snapshot(lane, mine, stream, t - warm))
            docs, demand = admit(lane, mine, stream)
            creates += docs
            if t >= warm:
                lane.demand.append(demand)
        if measuring:
            next_checkpoint += CHECKPOINT_EVERY
        if creates:
            cluster.kubectl("create", "-f", "-", objects=creates)
        if any(p.phase == "Succeeded" for p in pods):
            # One deletecollection request: `kubectl delete` by name or selector sends a
            # request per pod, which at six lanes' completions took longer than a tick.
            cluster.kubectl("delete", "--raw", SUCCEEDED)
        ticks.append(time.monotonic() - started - t)
        time.sleep(max(0.0, TICK - ticks[-1]))
    return ticks


def ratios(points: list[dict[str, Any]], size: str) -> dict[str, float | None]:
    """The minimum and mean of one size's per-checkpoint ratios, and the pooled ratio (all
    placeable jobs over all the repack's), which small counts at single checkpoints swing
    less."""
    each = [c[f"ratio_{size}"] for c in points if c[f"ratio_{size}"] is not None]
    ideal = sum(c[f"ffd_placeable_{size}"] for c in points)
    return {
        f"min_ratio_{size}": min(each) if each else None,
        f"mean_ratio_{size}": round(sum(each) / len(each), 3) if each else None,
        f"pooled_ratio_{size}": ratio(sum(c[f"placeable_{size}"] for c in points), ideal),
    }


def summary(lane: Lane) -> dict[str, Any]:
    running = sum(c["running_gpus"] for c in lane.checkpoints) / len(lane.checkpoints)
    return {
        "scheduler": lane.scheduler,
        "description": lane.description,
        "capacity_gpus": lane.capacity,
        "jobs_started": lane.next_job,
        # GPUs released by finished jobs over the GPUs in use: 2 means the lane's running
        # work was replaced twice over during the window.
        "turnover": round(lane.completed_gpus / running, 2) if running else None,
        "requested_load": {
            "min": round(min(lane.demand), 3),
            "mean": round(sum(lane.demand) / len(lane.demand), 3),
            "max": round(max(lane.demand), 3),
        },
        "mean_load": round(sum(c["load"] for c in lane.checkpoints) / len(lane.checkpoints), 3),
        **ratios(lane.checkpoints, "8gpu"),
        **ratios(lane.checkpoints, "4gpu"),
        "checkpoints_without_ideal": sum(1 for c in lane.checkpoints if c["ratio_8gpu"] is None),
        "max_pending_jobs": max(c["pending_jobs"] for c in lane.checkpoints),
        "max_ffd_pending_jobs": max(c["ffd_pending_jobs"] for c in lane.checkpoints),
        "checkpoints": lane.checkpoints,
    }


def combined(short: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One lane over every seed: ratios pooled over all checkpoints, the worst of the rest."""
    each = [run["lanes"][short] for run in runs]
    points = [c for lane in each for c in lane["checkpoints"]]
    return {
        "scheduler": each[0]["scheduler"],
        "description": each[0]["description"],
        "turnover": min(lane["turnover"] for lane in each),
        "requested_load": {
            "min": min(lane["requested_load"]["min"] for lane in each),
            "mean": round(sum(lane["requested_load"]["mean"] for lane in each) / len(each), 3),
            "max": max(lane["requested_load"]["max"] for lane in each),
        },
        "mean_load": round(sum(c["load"] for c in points) / len(points), 3),
        **ratios(points, "8gpu"),
        **ratios(points, "4gpu"),
        "checkpoints": len(points),
        "checkpoints_without_ideal": sum(1 for c in points if c["ratio_8gpu"] is None),
        "max_pending_jobs": max(lane["max_pending_jobs"] for lane in each),
        "max_ffd_pending_jobs": max(lane["max_ffd_pending_jobs"] for lane in each),
    }


def run_seed(
    cluster: LocalCluster, base: list[Lane], seed: int, warm: int, window: int, lifetime: int
) -> dict[str, Any]:
    fresh = [Lane(b.short, b.scheduler, b.description, dict(b.capacities)) for b in base]
    stream = job_stream(seed, 20000, lifetime)
    try:
        ticks = drive(cluster, fresh, stream, warm, window)
    finally:
        cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--wait=true", "--timeout=300s")
    sizes = Counter(j.gpus for j in stream[: max(lane.next_job for lane in fresh)])
    return {
        "seed": seed,
        "tick_seconds": {"mean": round(sum(ticks) / len(ticks), 2), "max": round(max(ticks), 2)},
        "job_sizes": {str(k): v for k, v in sorted(sizes.items())},
        "lanes": {lane.short: summary(lane) for lane in fresh},
    }


def run_b4c(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    eights, fours, lifetime = scale.churn_nodes, scale.churn_nodes, scale.churn_lifetime
    warm, window = lifetime * 3 // 2, scale.churn_window
    base = lanes()
    nodes = [n for lane in base for n in lane_nodes(lane, eights, fours)]
    cluster.create_nodes(nodes, timeout=300)
    fleet.namespace(cluster, NAMESPACE)
    start_alternatives(cluster)
    try:
        runs = [run_seed(cluster, base, s, warm, window, lifetime) for s in scale.churn_seeds]
    finally:
        cluster.supervisor.stop(ALTERNATIVES_PROCESS)
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cluster.kubectl("delete", "nodes", "-l", LANE_LABEL, "--wait=false")
    return {
        "name": "B4c GPU packing under churn",
        "scale": scale.name,
        "seeds": list(scale.churn_seeds),
        "nodes_per_lane": {"8gpu": eights, "4gpu": fours},
        "target_load": TARGET_LOAD,
        "warmup_seconds": warm,
        "window_seconds": window,
        "checkpoint_every_seconds": CHECKPOINT_EVERY,
        "mean_lifetime_seconds": lifetime,
        "lanes": {lane.short: combined(lane.short, runs) for lane in base},
        "runs": runs,
        "goal": "min 8-GPU ratio >= 0.9, and above the default profile at every checkpoint",
    }
