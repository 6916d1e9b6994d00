"""B6's section of bench/REPORT.md, from bench/results/b6-gpu-hours.json."""

from __future__ import annotations

from typing import Any

from bench.replay.section import (
    audit_lines,
    comparisons_table,
    figures_table,
    lanes_list,
    normalised,
    pending_table,
)


def section_b6(raw: dict[str, Any]) -> list[str]:
    r = normalised(raw)
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
        *lanes_list(r),
        "",
        *figures_table(r),
        "",
        *comparisons_table(r),
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
