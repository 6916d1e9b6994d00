"""B7, the whole benchmark: the plan from the trace, every lane `repeats` times, side by side,
and each figure's min, median and max per lane.

The runs of a wave share the machine: their clusters start one after another, then their
days begin together, so that every lane meets the same contention. A difference between two
lanes counts only where their ranges do not overlap.
"""

from __future__ import annotations

import statistics
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.serving import load, measure
from bench.serving.lane import LANES, LaneRun, Run
from bench.serving.plan import Plan, Timers, make_plan
from localcluster.binaries import REPO
from localcluster.karpenter import load_catalog


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


def inputs(size: Size, trace: Path = load.DEFAULT_TRACE) -> Plan:
    """Everything read and checked, before any cluster starts."""
    rates = load.read_rates(trace)
    services = load.read_services(models=rates)
    return make_plan(
        rates, services, first_bucket=size.first_bucket, buckets=size.buckets, timers=Timers()
    )


def run_wave(plan: Plan, runs: Sequence[tuple[str, int]], workdir: Path) -> list[Run]:
    lanes = [LaneRun(lane, r, plan, workdir / f"b7-{lane}-{r}") for lane, r in runs]
    results: list[Run | None] = [None] * len(lanes)
    failures: list[str] = []
    go = threading.Event()
    try:
        for lane in lanes:
            print(f"B7 {lane.lane} #{lane.repeat}: cluster and warm-up", flush=True)
            lane.prepare()
            print(f"B7 {lane.lane} #{lane.repeat}: ready after {lane.warmup:.0f}s", flush=True)

        def day(i: int) -> None:
            try:
                results[i] = lanes[i].day(go)
            except Exception:
                failures.append(traceback.format_exc())

        threads = [threading.Thread(target=day, args=(i,)) for i in range(len(lanes))]
        for t in threads:
            t.start()
        print(f"B7: {len(lanes)} days begin ({plan.duration:.0f}s each)", flush=True)
        go.set()
        for t in threads:
            t.join()
    finally:
        for lane in lanes:
            lane.down()
    if failures:
        raise RuntimeError("B7 lane failed:\n" + "\n".join(failures))
    return [r for r in results if r is not None]


def spread(values: Sequence[float | None]) -> dict[str, float | None]:
    found = [v for v in values if v is not None]
    if not found:
        return {"min": None, "median": None, "max": None}
    return {"min": min(found), "median": statistics.median(found), "max": max(found)}


def apart(a: dict[str, float | None], b: dict[str, float | None]) -> bool:
    """Whether two ranges do not overlap: only then is a difference called real."""
    if None in (a["min"], a["max"], b["min"], b["max"]):
        return False
    return a["max"] < b["min"] or b["max"] < a["min"]  # type: ignore[operator]


def summarise(
    runs: Sequence[Run], figures: dict[tuple[str, int], dict[str, Any]]
) -> dict[str, Any]:
    lanes: dict[str, Any] = {}
    for lane in LANES:
        mine = [figures[(r.lane, r.repeat)] for r in runs if r.lane == lane]
        if not mine:
            continue
        summary: dict[str, Any] = {key: spread([f[key] for f in mine]) for key in FIGURES}
        sizes = sorted({k for f in mine for k in f["pending_by_gpus"]}, key=int)
        summary["pending_p95_s"] = {
            size: spread([f["pending_by_gpus"][size]["p95_s"] for f in mine]) for size in sizes
        }
        summary["pending_p50_s"] = {
            size: spread([f["pending_by_gpus"][size]["p50_s"] for f in mine]) for size in sizes
        }
        summary["never_bound"] = sum(
            v["never_bound"] for f in mine for v in f["pending_by_gpus"].values()
        )
        lanes[lane] = summary
    compared: dict[str, Any] = {}
    alone = lanes.get("karpenter-alone")
    for lane, summary in lanes.items():
        if lane == "karpenter-alone" or alone is None:
            continue
        compared[lane] = {
            key: {
                "ratio_of_medians": _ratio(summary[key]["median"], alone[key]["median"]),
                "ranges_apart": apart(summary[key], alone[key]),
            }
            for key in FIGURES
        }
    if "product" in lanes and "profile" in lanes:
        compared["product_vs_profile"] = {
            key: {
                "ratio_of_medians": _ratio(
                    lanes["product"][key]["median"], lanes["profile"][key]["median"]
                ),
                "ranges_apart": apart(lanes["product"][key], lanes["profile"][key]),
            }
            for key in FIGURES
        }
    return {"lanes": lanes, "compared": compared}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def run_b7(
    size_name: str, out: Path, workdir: Path | None = None, *, plot: bool = True
) -> dict[str, Any]:
    size = SIZES[size_name]
    plan = inputs(size)
    catalog = load_catalog()
    bound = measure.offline_bound(plan, catalog)
    runs_wanted = [(lane, r) for r in range(size.repeats) for lane in LANES]
    waves = [runs_wanted[i : i + size.parallel] for i in range(0, len(runs_wanted), size.parallel)]
    runs: list[Run] = []
    for wave in waves:
        runs += run_wave(plan, wave, workdir or REPO / ".cluster")
    figures = {
        (r.lane, r.repeat): measure.lane_figures(r.seen, r.evictions, plan, catalog) for r in runs
    }
    result: dict[str, Any] = {
        "name": "B7 a day of LLM serving under Karpenter",
        "scale": size_name,
        "plan": plan.summary(),
        "repeats": size.repeats,
        "offline_bound": bound,
        "gpu_hours_needed": round(measure.needed_gpu_hours(plan), 1),
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
    if plot:
        draw(result, plan, out / "b7-serving.png")
    return result


def draw(result: dict[str, Any], plan: Plan, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        ax.set_xlabel("hour of day")
        ax.legend(fontsize=7)
    fig.suptitle(f"B7: ServeGen's day under Karpenter, {result['repeats']} repeat(s) per lane")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
