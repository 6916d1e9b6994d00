"""A replay benchmark's figures, drawn from its result (every run's series and evictions),
one colour per lane as bench/replay/lanes.yaml gives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.replay.plan import Plan


def _colour(result: dict[str, Any], lane: str) -> str:
    return str(result["lane_specs"][lane]["colour"])


def _label(result: dict[str, Any], lane: str) -> str:
    return str(result["lane_specs"][lane]["label"])


def draw_day(result: dict[str, Any], plan: Plan, title: str, path: Path) -> None:
    """Serving pods and GPU nodes over time per run, against the replicas asked for, and
    the dollars spent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (pods, nodes, cost) = plt.subplots(1, 3, figsize=(15, 4))
    shown: set[str] = set()
    for run in result["runs"]:
        s, lane = run["series"], run["lane"]
        label = _label(result, lane) if lane not in shown else None
        shown.add(lane)
        colour = _colour(result, lane)
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
    fig.suptitle(f"{title}, {result['repeats']} run(s) per lane")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_choice(result: dict[str, Any], plan: Plan, title: str, path: Path) -> None:
    """What a user decides from: every run's GPU dollars against the serving pods Karpenter
    evicted (one point a run), and each run's evictions accumulated over the day."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (scatter, over_time) = plt.subplots(1, 2, figsize=(13, 4.5))
    shown: set[str] = set()
    start = plan.trace_seconds(0) / 3600
    end = plan.trace_seconds(plan.duration) / 3600
    for run in result["runs"]:
        lane = run["lane"]
        label = _label(result, lane) if lane not in shown else None
        shown.add(lane)
        colour = _colour(result, lane)
        scatter.scatter(
            run["serving_pods_evicted"], run["gpu_dollars"], color=colour, label=label, s=30
        )
        times = run["serving_evictions_h"]
        over_time.step(
            [start, *times, end],
            [0, *range(1, len(times) + 1), len(times)],
            where="post", color=colour, linewidth=1.0, label=label,
        )  # fmt: skip
    bound = result.get("offline_bound", {}).get("gpu_dollars")
    if bound:
        scatter.axhline(bound, color="black", linewidth=0.6, linestyle="--")
        scatter.annotate("offline bound", (0, bound), fontsize=7, va="bottom")
    scatter.set_xlim(left=-0.5)
    scatter.set_xlabel("serving pods evicted by Karpenter (bound: 0)")
    scatter.set_ylabel("GPU dollars (trace clock)")
    scatter.set_title("each run: dollars against evictions")
    over_time.set_xlabel("trace hour")
    over_time.set_ylabel("serving pods evicted so far")
    over_time.set_title("evictions over the day, each run")
    for ax in (scatter, over_time):
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{title}, {result['repeats']} run(s) per lane")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
