"""B7, the whole benchmark: the plan from ServeGen's day, the lanes on Karpenter-only
clusters (bench.replay), and its plot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.replay import waves
from bench.replay.lane import SCHEDULER, Workload, namespace_selector
from bench.replay.plan import Plan, Timers
from bench.serving import hpa_plan, load
from localcluster.binaries import REPO
from localcluster.karpenter import GPU, load_catalog

NAMESPACE = "b7-serving"


@dataclass(frozen=True)
class Size:
    first_bucket: int  # 10-minute buckets from 00:00
    buckets: int
    repeats: int
    parallel: int  # runs at once


SIZES = {
    # The whole day, three repeats of three lanes, all nine at once (about 60 min).
    "full": Size(0, 144, 3, 9),
    # 18:00 to midnight: the evening peak and the scale-down after it.
    "small": Size(108, 36, 3, 9),
    # make test's smoke: one repeat, the hour after 22:00 when deepseek-r1 peaks and falls.
    "smoke": Size(132, 6, 1, 3),
}


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "b7-serving"},
        "spec": {
            "namespaceSelector": namespace_selector(NAMESPACE),
            "placement": {"schedulerName": SCHEDULER, "avoidGPUNodes": True},
            "deletionCost": {
                # GPU fill on GPU nodes, CPU fill for the frontends on CPU nodes: the replicas
                # on the emptiest nodes go first, so scale-downs empty whole nodes.
                "signals": [
                    {
                        "type": "NodeConsolidation",
                        "nodeConsolidation": {"resources": [GPU, "cpu"], "points": 1000},
                    }
                ],
                "min": 0,
                "max": 1000,
                # HPA-speed timers: 1 s of replay is 30 s of the day.
                "minUpdateIntervalSeconds": 1,
                "karpenterDisruptionCost": {},
            },
        },
    }


def inputs(size: Size, trace: Path = load.DEFAULT_TRACE) -> Plan:
    """Everything read and checked, before any cluster starts."""
    rates = load.read_rates(trace)
    services = load.read_services(models=rates)
    return hpa_plan.make_plan(
        rates, services, first_bucket=size.first_bucket, buckets=size.buckets, timers=Timers()
    )


def run_b7(
    size_name: str,
    out: Path,
    workdir: Path | None = None,
    *,
    plot: bool = True,
    consolidation: str = "WhenEmptyOrUnderutilized",
) -> dict[str, Any]:
    """`consolidation`: the GPU pool's consolidationPolicy; WhenEmpty measures the pools
    that never move GPU pods."""
    size = SIZES[size_name]
    workload = Workload(NAMESPACE, inputs(size), policy(), consolidation)
    lanes = waves.run_lanes(
        workload, size.repeats, size.parallel, workdir or REPO / ".cluster", load_catalog()
    )
    result: dict[str, Any] = {
        "name": "B7 a day of LLM serving under Karpenter",
        "scale": size_name,
        "plan": hpa_plan.summary(workload.plan),
        "gpu_consolidation": consolidation,
        **lanes,
    }
    if plot:
        title = f"B7: ServeGen's day under Karpenter (GPU pool {consolidation})"
        moves = consolidation == "WhenEmptyOrUnderutilized"
        name = "b7-serving" if moves else "b7-serving-when-empty"
        waves.draw(result, workload, title, out / f"{name}.png")
    return result
