"""Every lane of a benchmark, `repeats` times, side by side, and each figure's min, median
and max per lane.

The runs of a wave share the machine: their clusters start one after another, then their
plans begin together, so that every lane meets the same contention. With `parallel` equal to
the number of lanes, a wave is one run of every lane. A difference between two lanes counts
only where their ranges do not overlap.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lanes import compare, spread
from bench.replay import measure
from bench.replay.lane import LaneRun, Run, Workload
from bench.replay.lane_spec import Benchmark, LaneSpec
from bench.replay.plan import Plan
from localcluster.karpenter import Catalog

GPUS_FROM_ALLOCATABLE = "gpus_from_allocatable"
# Figures summarised per lane; the first ones are the acceptance's.
FIGURES = (
    "gpu_node_hours",
    "gpu_dollars",
    "dollars",
    "serving_pods_disrupted",
    "serving_pods_evicted",
    "gpu_hours_provisioned",
    "provisioned_over_needed",
    "nodes_launched",
    "nodes_emptied",
    "nodes_consolidated_moving_pods",
)


def run_wave(
    workload: Workload, runs: Sequence[tuple[LaneSpec, int]], wave: int, workdir: Path
) -> list[Run]:
    tag = workload.namespace
    lanes = [
        LaneRun(lane, r, wave, workload, workdir / f"{tag}-{lane.name}-{r}") for lane, r in runs
    ]
    results: list[Run | None] = [None] * len(lanes)
    failures: list[str] = []
    go = threading.Event()
    try:
        for lane in lanes:
            print(f"{tag} {lane.lane} #{lane.repeat}: cluster and warm-up", flush=True)
            lane.prepare()
            print(f"{tag} {lane.lane} #{lane.repeat}: ready after {lane.warmup:.0f}s", flush=True)

        def day(i: int) -> None:
            try:
                results[i] = lanes[i].day(go)
            except Exception:
                failures.append(traceback.format_exc())

        threads = [threading.Thread(target=day, args=(i,)) for i in range(len(lanes))]
        for t in threads:
            t.start()
        print(f"{tag}: {len(lanes)} runs begin ({workload.plan.duration:.0f}s each)", flush=True)
        go.set()
        for t in threads:
            t.join()
    finally:
        for lane in lanes:
            lane.down()
    if failures:
        raise RuntimeError(f"{tag}: a lane failed:\n" + "\n".join(failures))
    return [r for r in results if r is not None]


def _lane_summary(mine: Sequence[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {key: spread([f[key] for f in mine]) for key in FIGURES}
    sizes = sorted({k for f in mine for k in f["pending_by_gpus"]}, key=int)
    for q in ("p50", "p95"):
        summary[f"pending_{q}_s"] = {
            size: spread(
                [f["pending_by_gpus"][size][f"{q}_s"] for f in mine if size in f["pending_by_gpus"]]
            )
            for size in sizes
        }
    by_size = [f["pending_by_gpus"] for f in mine]
    if all("on_new_node" in v for sized in by_size for v in sized.values()):
        summary["pending_on_new_node"] = {
            size: spread([sized[size]["on_new_node"] for sized in by_size if size in sized])
            for size in sizes
        }
    summary["never_bound"] = sum(
        v["never_bound"] for f in mine for v in f["pending_by_gpus"].values()
    )
    return summary


def summarise(
    runs: Sequence[Run], figures: dict[tuple[str, int], dict[str, Any]], bench: Benchmark
) -> dict[str, Any]:
    """Each lane's spreads, and every comparison the benchmark asks for, keyed
    "lane / against"."""
    lanes: dict[str, Any] = {}
    for spec in bench.lanes:
        mine = [figures[(r.lane, r.repeat)] for r in runs if r.lane == spec.name]
        if mine:
            lanes[spec.name] = _lane_summary(mine)
    compared = {
        f"{a} / {b}": compare(lanes[a], lanes[b], FIGURES)
        for a, b in bench.comparisons()
        if a in lanes and b in lanes
    }
    return {"lanes": lanes, "compared": compared}


def spec_record(spec: LaneSpec) -> dict[str, Any]:
    """What a result keeps of a lane's spec: what it ran, and how the plots show it."""
    return {
        "label": spec.title,
        "colour": spec.colour,
        "scheduler": spec.scheduler,
        "policy": spec.policy,
        "karpenter_gates": dict(spec.karpenter_gates),
        "gpu_consolidation": spec.gpu_consolidation,
        "gpu_pod_annotations": dict(spec.gpu_pod_annotations),
        "headroom": spec.headroom,
        "headroom_gpus": spec.headroom_gpus,
    }


def serving_evictions(run: Run, plan: Plan) -> list[float]:
    """When Karpenter evicted each serving (GPU) pod, in trace hours, in order."""
    serving = {s.name for s in plan.services if s.gpus}
    by_name = {p.name: p for p in run.seen.pods.values()}
    return sorted(
        round(plan.trace_seconds(e.at) / 3600, 4)
        for e in run.evictions
        if 0 <= e.at <= plan.duration and e.pod in by_name and by_name[e.pod].service in serving
    )


def run_lanes(
    workload: Workload,
    bench: Benchmark,
    repeats: int,
    parallel: int,
    workdir: Path,
    catalog: Catalog,
) -> dict[str, Any]:
    """Every lane of `bench` `repeats` times, `parallel` runs at once; the summary and every
    run."""
    wanted = [(lane, r) for r in range(repeats) for lane in bench.lanes]
    runs: list[Run] = []
    for wave, i in enumerate(range(0, len(wanted), parallel)):
        runs += run_wave(workload, wanted[i : i + parallel], wave, workdir)
    plan = workload.plan
    figures = {
        (r.lane, r.repeat): measure.lane_figures(r.seen, r.evictions, plan, catalog) for r in runs
    }
    return {
        "repeats": repeats,
        "parallel": parallel,
        "lane_specs": {spec.name: spec_record(spec) for spec in bench.lanes},
        "baseline": bench.baseline,
        "offline_bound": measure.offline_bound(plan, catalog),
        "gpu_hours_needed": round(measure.needed_gpu_hours(plan), 1),
        # Results without this flag counted a node's GPUs from its capacity alone, which
        # Karpenter's KWOK provider sets to the launching pods' requests.
        GPUS_FROM_ALLOCATABLE: True,
        **summarise(runs, figures, bench),
        "runs": [
            {
                "lane": r.lane,
                "repeat": r.repeat,
                "wave": r.wave,
                "serving_evictions_h": serving_evictions(r, plan),
                "warmup_s": round(r.warmup_seconds, 1),
                "late_steps": r.late_steps,
                "operator_writes": r.writes,
                **figures[(r.lane, r.repeat)],
                "series": measure.series(r.seen, plan, catalog),
            }
            for r in runs
        ],
    }
