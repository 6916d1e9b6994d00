"""B4c: GPU packing under churn, through the real kube-scheduler.

Every profile gets its own set of nodes (churn_profiles.py): an identical set of 8-GPU and
4-GPU fake nodes, and the same seeded stream of GPU jobs (bare pods of 1/2/4/8 GPUs). KWOK
completes each pod a lifetime after it starts (localcluster/stages/pod-lifetime.yaml), so
capacity comes and goes. Admission is closed-loop: a profile's next job is created whenever
the GPUs its unfinished jobs ask for stay within the target load, so every profile runs at
the same requested load whatever its scheduler does with it. All profiles run at the same
time, in one driver, so they share the machine's noise; that driver is the benchmark's one
lane (bench.lanes), run once per seed.

After a warm-up of one and a half mean lifetimes, each profile is measured at fixed
checkpoints against an offline first-fit-decreasing repack of the jobs it runs at that
moment (`churn_model.checkpoint`).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import fleet
from bench.lanes import Figures, Lane, compare, rounded, run_in_turn, summarise
from bench.packing.churn_model import Job, checkpoint, job_stream, ratio
from bench.packing.churn_profiles import (
    ALTERNATIVES_PROCESS,
    LANE_LABEL,
    NAMESPACE,
    Profile,
    job_pod,
    profile_nodes,
    profiles,
    start_alternatives,
)
from bench.scale import Scale
from localcluster import LocalCluster

TARGET_LOAD = 0.9  # the most of a lane's GPUs its unfinished jobs may ask for
CHECKPOINT_EVERY = 10  # seconds
TICK = 1.0
SUCCEEDED = f"/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=status.phase%3DSucceeded"
# Each profile's figures over the seeds: their spread, and each profile's against the default.
FIGURES = (
    "pooled_ratio_8gpu",
    "min_ratio_8gpu",
    "mean_ratio_8gpu",
    "pooled_ratio_4gpu",
    "mean_load",
)


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


def snapshot(lane: Profile, pods: list[PodState], stream: list[Job], t: float) -> dict[str, Any]:
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
    lane: Profile, pods: list[PodState], stream: list[Job]
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


def count_completions(
    lane: Profile, pods: list[PodState], stream: list[Job], counted: bool
) -> None:
    """A job that was unfinished at the last list and is now Succeeded or gone has finished:
    nothing but the bench deletes these pods, and it deletes only Succeeded ones."""
    alive = {p.name for p in pods if p.phase not in ("Succeeded", "Failed")}
    if counted:
        lane.completed_gpus += sum(gpus_of(name, stream) for name in lane.alive - alive)
    lane.alive = alive


def drive(
    cluster: LocalCluster, all_lanes: list[Profile], stream: list[Job], warm: int, window: int
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


def summary(lane: Profile) -> dict[str, Any]:
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
    cluster: LocalCluster, base: list[Profile], seed: int, warm: int, window: int, lifetime: int
) -> dict[str, Any]:
    fresh = [b.fresh() for b in base]
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
    warm, window, seeds = lifetime * 3 // 2, scale.churn_window, scale.churn_seeds
    base = profiles()
    nodes = [n for lane in base for n in profile_nodes(lane, eights, fours)]
    cluster.create_nodes(nodes, timeout=300)
    fleet.namespace(cluster, NAMESPACE)
    start_alternatives(cluster)

    def one_seed(cluster: LocalCluster, repeat: int) -> Figures:
        return run_seed(cluster, base, seeds[repeat % len(seeds)], warm, window, lifetime)

    try:
        runs = run_in_turn([Lane("profiles", one_seed)], len(seeds) * scale.repeats, cluster)
    finally:
        cluster.supervisor.stop(ALTERNATIVES_PROCESS)
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cluster.kubectl("delete", "nodes", "-l", LANE_LABEL, "--wait=false")
    return {
        "name": "B4c GPU packing under churn",
        "scale": scale.name,
        "seeds": list(seeds),
        "nodes_per_lane": {"8gpu": eights, "4gpu": fours},
        "target_load": TARGET_LOAD,
        "warmup_seconds": warm,
        "window_seconds": window,
        "checkpoint_every_seconds": CHECKPOINT_EVERY,
        "mean_lifetime_seconds": lifetime,
        "lanes": {lane.short: combined(lane.short, runs["profiles"]) for lane in base},
        "runs": runs["profiles"],
        "goal": "min 8-GPU ratio >= 0.9, and above the default profile at every checkpoint",
        "repeats": scale.repeats,
        **spreads(runs["profiles"], [lane.short for lane in base]),
    }


def spreads(runs: list[Figures], shorts: list[str]) -> dict[str, Any]:
    """Each profile's figures over the seeds as min, median and max; each profile's
    against the default profile's."""
    summary = summarise({s: [run["lanes"][s] for run in runs] for s in shorts}, FIGURES)
    return {
        "spread": rounded(summary, 3),
        "compared": {
            f"{short}_vs_default": compare(summary[short], summary["default"], FIGURES)
            for short in shorts
            if short != "default"
        },
    }
