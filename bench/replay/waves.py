"""Every lane of a workload, `repeats` times, side by side, and each figure's min, median and
max per lane.

The runs of a wave share the machine: their clusters start one after another, then their
plans begin together, so that every lane meets the same contention. A difference between
two lanes counts only where their ranges do not overlap.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lanes import compare, spread
from bench.replay import measure
from bench.replay.lane import LANES, LaneRun, Run, Workload
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


def run_wave(workload: Workload, runs: Sequence[tuple[str, int]], workdir: Path) -> list[Run]:
    tag = workload.namespace
    lanes = [LaneRun(lane, r, workload, workdir / f"{tag}-{lane}-{r}") for lane, r in runs]
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
    runs: Sequence[Run], figures: dict[tuple[str, int], dict[str, Any]]
) -> dict[str, Any]:
    lanes: dict[str, Any] = {}
    for lane in LANES:
        mine = [figures[(r.lane, r.repeat)] for r in runs if r.lane == lane]
        if mine:
            lanes[lane] = _lane_summary(mine)
    compared: dict[str, Any] = {}
    alone = lanes.get("karpenter-alone")
    for lane, summary in lanes.items():
        if lane != "karpenter-alone" and alone is not None:
            compared[lane] = compare(summary, alone, FIGURES)
    if "product" in lanes and "profile" in lanes:
        compared["product_vs_profile"] = compare(lanes["product"], lanes["profile"], FIGURES)
    return {"lanes": lanes, "compared": compared}


def run_lanes(
    workload: Workload, repeats: int, parallel: int, workdir: Path, catalog: Catalog
) -> dict[str, Any]:
    """Every lane `repeats` times, `parallel` runs at once; the summary and every run."""
    wanted = [(lane, r) for r in range(repeats) for lane in LANES]
    runs: list[Run] = []
    for i in range(0, len(wanted), parallel):
        runs += run_wave(workload, wanted[i : i + parallel], workdir)
    plan = workload.plan
    figures = {
        (r.lane, r.repeat): measure.lane_figures(r.seen, r.evictions, plan, catalog) for r in runs
    }
    return {
        "repeats": repeats,
        "offline_bound": measure.offline_bound(plan, catalog),
        "gpu_hours_needed": round(measure.needed_gpu_hours(plan), 1),
        # Results without this flag counted a node's GPUs from its capacity alone, which
        # Karpenter's KWOK provider sets to the launching pods' requests.
        GPUS_FROM_ALLOCATABLE: True,
        **summarise(runs, figures),
        "runs": [
            {
                "lane": r.lane,
                "repeat": r.repeat,
                "warmup_s": round(r.warmup_seconds, 1),
                "late_steps": r.late_steps,
                "operator_writes": r.writes,
                **figures[(r.lane, r.repeat)],
                "series": measure.series(r.seen, plan, catalog),
            }
            for r in runs
        ],
    }


def draw(result: dict[str, Any], workload: Workload, title: str, path: Path) -> None:
    """Serving pods and GPU nodes over time per run, against the replicas asked for, and
    the dollars spent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = workload.plan
    fig, (pods, nodes, cost) = plt.subplots(1, 3, figsize=(15, 4))
    colours = dict(zip(LANES, ("tab:gray", "tab:blue", "tab:green"), strict=True))
    shown: set[str] = set()
    for run in result["runs"]:
        s = run["series"]
        label = run["lane"] if run["lane"] not in shown else None
        shown.add(run["lane"])
        colour = colours[run["lane"]]
        pods.plot(s["t_hours"], s["serving_pods"], color=colour, linewidth=0.8, label=label)
        nodes.plot(s["t_hours"], s["gpu_nodes"], color=colour, linewidth=0.8, label=label)
        cost.plot(s["t_hours"], s["dollars"], color=colour, linewidth=0.8, label=label)
    wanted = plan.gpus_over_time()
    pods.step(
        [plan.trace_seconds(t) / 3600 for t, _ in wanted],
        [sum(d.values()) for _, d in wanted],
        where="post", color="black", linewidth=0.6, label="replicas asked (GPU services)",
    )  # fmt: skip
    pods.set_title("serving pods bound")
    nodes.set_title("GPU nodes")
    cost.set_title("dollars spent (trace clock)")
    for ax in (pods, nodes, cost):
        ax.set_xlabel("trace hour")
        ax.legend(fontsize=7)
    fig.suptitle(f"{title}, {result['repeats']} repeat(s) per lane")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
