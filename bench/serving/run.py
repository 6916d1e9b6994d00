"""B7 and B7E, the whole benchmarks: the plan from a ServeGen day, the lanes of
bench/replay/lanes.yaml on Karpenter-only clusters (bench.replay), and their plots.

B7 compares what a Karpenter user would run for serving: Karpenter alone, with its own
PodDeletionCostManagement gate, our scheduler profile beside the gate, and the product (also
beside the gate). B7E compares the configurations that evict no serving pod at all: a
WhenEmpty GPU pool (alone, with the gate, with the product) and do-not-disrupt GPU pods
(alone, with the product).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.replay import lane_spec, plots, waves
from bench.replay.lane import SCHEDULER, Workload, karpenter_options, namespace_selector
from bench.replay.plan import Plan, Timers
from bench.serving import hpa_plan, load
from localcluster import karpenter
from localcluster.binaries import REPO
from localcluster.karpenter import GPU, load_catalog

NAMESPACE = "b7-serving"
# Each run's lanes begin together: one wave holds one run of every lane.
B7, B7E = "B7", "B7E"


@dataclass(frozen=True)
class Size:
    first_bucket: int  # 10-minute buckets from 00:00
    buckets: int
    repeats: int
    compression: float
    parallel: int | None = None  # runs at once; None: one wave per repeat (every lane at once)


SIZES = {
    # 18:00 to midnight, the evening peak and the scale-downs after it, 20x: 18 min a wave,
    # three waves of five lanes, all of Karpenter's timers on the same clock.
    "full": Size(108, 36, 3, 20.0),
    # 21:00 to midnight, one wave.
    "small": Size(126, 18, 1, 20.0),
    # make test's smoke: one run of three lanes, the hour after 22:00 when deepseek-r1 peaks
    # and falls.
    "smoke": Size(132, 6, 1, 20.0),
}
SMOKE_LANES = ("karpenter-alone", "karpenter-gate", "product")


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
                # HPA-speed timers: 1 s of replay is 20 s of the day.
                "minUpdateIntervalSeconds": 1,
                "karpenterDisruptionCost": {},
            },
        },
    }


def inputs(size: Size, trace: Path = load.DEFAULT_TRACE, day: int = 0) -> Plan:
    """Everything read and checked, before any cluster starts."""
    rates = load.read_rates(trace, day)
    services = load.read_services(models=rates)
    return hpa_plan.make_plan(
        rates,
        services,
        first_bucket=size.first_bucket,
        buckets=size.buckets,
        timers=Timers(compression=size.compression),
    )


def prepare(
    name: str,
    size_name: str,
    trace: Path = load.DEFAULT_TRACE,
    day: int = 0,
    lanes: Sequence[str] | None = None,
) -> tuple[Workload, lane_spec.Benchmark]:
    """The workload and the lanes, every input checked (the trace and its SOURCE.md, the
    lanes, each lane's NodePools against Karpenter's CRD) before any cluster starts."""
    size = SIZES[size_name]
    if lanes is None and size_name == "smoke":
        lanes = SMOKE_LANES
    bench = lane_spec.benchmark(name, lanes)
    workload = Workload(NAMESPACE, inputs(size, trace, day), policy())
    for lane in bench.lanes:
        karpenter.manifests(karpenter_options(lane, workload.plan.timers))
    return workload, bench


def run_b7(
    size_name: str,
    out: Path,
    workdir: Path | None = None,
    *,
    plot: bool = True,
    name: str = B7,
    trace: Path = load.DEFAULT_TRACE,
    day: int = 0,
    lanes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """`name`: B7 or B7E, whose lanes lanes.yaml lists (or `lanes`, the command line's)."""
    size = SIZES[size_name]
    workload, bench = prepare(name, size_name, trace, day, lanes)
    parallel = size.parallel or len(bench.lanes)
    result: dict[str, Any] = {
        "name": f"{name} a day of LLM serving under Karpenter",
        "benchmark": name,
        "scale": size_name,
        "trace": str(trace),
        "day": day,
        "plan": hpa_plan.summary(workload.plan),
        **waves.run_lanes(
            workload,
            bench,
            size.repeats,
            parallel,
            workdir or REPO / ".cluster",
            load_catalog(),
        ),
    }
    if plot:
        stem = result_name(name, day)
        title = f"{name}: ServeGen day {day} under Karpenter"
        plots.draw_day(result, workload.plan, title, out / f"{stem}.png")
        plots.draw_choice(result, workload.plan, title, out / f"{stem}-choice.png")
    return result


def result_name(name: str, day: int) -> str:
    """Where a result is kept: b7-serving.json, b7e-no-eviction.json, with -day<N> for any
    day but the first."""
    stem = "b7-serving" if name == B7 else "b7e-no-eviction"
    return stem if day == 0 else f"{stem}-day{day}"
