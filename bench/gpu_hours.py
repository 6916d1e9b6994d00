"""B6: GPU node-hours on a real trace, with a real Karpenter launching and consolidating.

A window of the Alibaba GPU trace is replayed into clusters with no fixed nodes (bench.replay):
Karpenter (its KWOK provider, v1.15) launches GPU nodes from the harness's 4- and 8-GPU
instance types when tasks wait, and consolidates them when they empty or fall underused.
Each task is a one-replica Deployment, created at 0 replicas during the warm-up, scaled to 1
at the task's arrival and back to 0 at its end. Time runs at B7's compression (30x), with
the same timers: Karpenter's consolidateAfter is its 300 s over 30. A task shorter than a
node's launch is lengthened to it, so that no task ends before its node could exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import trace
from bench.replay import waves
from bench.replay.lane import SCHEDULER, Workload, namespace_selector
from bench.replay.plan import MAX_COMPRESSION, Plan, Shape, Step, Timers
from bench.replay.section import audit_lines, figures_table, pending_table
from bench.scale import Scale
from localcluster.binaries import REPO
from localcluster.karpenter import GPU, load_catalog

NAMESPACE = "b6-trace"
# A 12-hour window with seven 8-GPU tasks among 88 (ATC '23 trace, default list).
WINDOW_START = 10_850_000
# The least a task lives, in trace seconds: a node's launch in a cloud (1 to 2 minutes).
MIN_TASK_SECONDS = 120.0


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "b6-gpu"},
        "spec": {
            "namespaceSelector": namespace_selector(NAMESPACE),
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
                "minUpdateIntervalSeconds": 1,
                "karpenterDisruptionCost": {},
            },
        },
    }


def plan_of(window: trace.Window, timers: Timers) -> tuple[Plan, int]:
    """The window's tasks as one-replica Deployments; and how many were lengthened."""
    shortest = timers.replay(MIN_TASK_SECONDS)
    shapes, steps, lengthened = [], [], 0
    for task in window.tasks:
        shapes.append(Shape(task.name, task.gpus, f"{task.cpu_milli}m", f"{task.memory_mib}Mi"))
        end = max(task.end, task.start + shortest)
        lengthened += end > task.end
        steps += [
            Step(task.start, task.name, 1),
            Step(min(end, window.replay_seconds), task.name, 0),
        ]
    steps.sort(key=lambda s: (s.at, s.replicas))
    initial = {s.name: 0 for s in shapes}
    plan = Plan(tuple(shapes), window.first, window.length, timers, initial, tuple(steps))
    return plan, lengthened


def run_b6(cluster: object, scale: Scale, out: Path) -> dict[str, Any]:
    """`cluster` (the benchmarks' shared one) is not used: every lane needs a cluster of
    Karpenter's nodes only."""
    hours = 12 if scale.name != "small" else 6
    timers = Timers(startup=0)
    window = trace.load(WINDOW_START, hours * 3600, compression=MAX_COMPRESSION)
    plan, lengthened = plan_of(window, timers)
    workload = Workload(NAMESPACE, plan, policy())
    lanes = waves.run_lanes(workload, 3, 9, REPO / ".cluster", load_catalog())
    result: dict[str, Any] = {
        "name": "B6 GPU node-hours on the Alibaba trace",
        "scale": scale.name,
        "window": window.summary(),
        "plan": plan.summary(),
        "lengthened_to_a_launch": lengthened,
        "peak_gpus_needed": trace.peak_gpus(window.tasks),
        **lanes,
    }
    waves.draw(
        result, workload, "B6: the Alibaba GPU trace under Karpenter", out / "b6-gpu-hours.png"
    )
    return result


def section_b6(r: dict[str, Any]) -> list[str]:
    w, p = r["window"], r["plan"]
    bound = r["offline_bound"]
    return [
        "## B6: GPU node-hours on the Alibaba trace, with a real Karpenter",
        f"{w['tasks']} GPU tasks of the Alibaba cluster-trace-gpu-v2023 (ATC '23), those created"
        f" in a {w['trace_hours']}-hour window from trace second {w['trace_start_s']}, by GPUs:"
        f" {w['tasks_by_gpus']}. {w['fractional_rounded_up']} of them ask for a fraction of a"
        " GPU and get a whole one (Kubernetes has no fractional nvidia.com/gpu). Replayed"
        f" {p['compression']:g}x faster ({p['replay_seconds']} s per run) as one-replica"
        " Deployments into clusters of Karpenter's nodes only (KWOK provider v1.15; 4- and"
        " 8-GPU g5 and p4d types, spot and on-demand), a fresh one per run, with B7's timers:"
        f" consolidateAfter {p['consolidate_after_s']} s of replay (300 s of the trace)."
        f" {r['lengthened_to_a_launch']} tasks shorter than a node's launch (120 s) were"
        f" lengthened to it. Peak GPUs in use: {r['peak_gpus_needed']}. Each lane ran"
        f" {r['repeats']} times; cells are the median (min-max), and a ratio of medians is"
        " **real** only when the two ranges do not overlap.",
        "",
        *figures_table(r),
        "",
        *pending_table(r),
        "",
        f"GPU-hours the tasks hold: {r['gpu_hours_needed']}. Offline bound (every instant"
        " packed onto as few 8-GPU nodes as hold it, and onto the cheapest spot nodes):"
        f" {bound['gpu_node_hours']} GPU node-hours, ${bound['gpu_dollars']} of GPU nodes.",
        "",
        *audit_lines(r),
        "",
        "![B6](results/b6-gpu-hours.png)",
    ]
