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

from bench.gpu_hours import trace
from bench.replay import lane_spec, plots, waves
from bench.replay.lane import SCHEDULER, Workload, namespace_selector
from bench.replay.plan import MAX_COMPRESSION, Plan, Shape, Step, Timers
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
    bench = lane_spec.benchmark("B6")
    lanes = waves.run_lanes(
        workload, bench, 3, 3 * len(bench.lanes), REPO / ".cluster", load_catalog()
    )
    result: dict[str, Any] = {
        "name": "B6 GPU node-hours on the Alibaba trace",
        "scale": scale.name,
        "window": window.summary(),
        "plan": plan.summary(),
        "lengthened_to_a_launch": lengthened,
        "peak_gpus_needed": trace.peak_gpus(window.tasks),
        **lanes,
    }
    plots.draw_day(
        result, workload.plan, "B6: the Alibaba GPU trace under Karpenter", out / "b6-gpu-hours.png"
    )
    return result
