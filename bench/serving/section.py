"""B7's section of bench/REPORT.md, from bench/results/b7-serving.json."""

from __future__ import annotations

from typing import Any

from bench.replay.section import audit_lines, figures_table, pending_table
from bench.replay.waves import GPUS_FROM_ALLOCATABLE


def goals(r: dict[str, Any]) -> list[tuple[str, bool | None]]:
    """The acceptance, checked against this run (None: not measurable from it)."""
    vs = r["compared"].get("product")
    lanes = r["lanes"]
    if vs is None or "karpenter-alone" not in lanes:
        return []

    def met(key: str, most: float) -> bool:
        c = vs[key]
        return (
            c["ratio_of_medians"] is not None
            and c["ratio_of_medians"] <= most
            and c["ranges_apart"]
        )

    alone_evicted = lanes["karpenter-alone"]["serving_pods_disrupted"]["median"]
    evicted = (
        met("serving_pods_disrupted", 0.5)
        if alone_evicted
        else lanes["product"]["serving_pods_disrupted"]["max"] == 0
    )
    sync = r["plan"]["hpa_sync_s"] * r["plan"]["compression"]
    p95 = []
    for size, spread in lanes["product"]["pending_p95_s"].items():
        base = lanes["karpenter-alone"]["pending_p95_s"].get(size, {}).get("median")
        if spread["median"] is not None and base is not None:
            p95.append(spread["median"] <= base + sync)
    pp = r["compared"].get("product_vs_profile", {})
    return [
        ("GPU node-hours ≤ 0.8 of Karpenter alone, ranges apart", met("gpu_node_hours", 0.8)),
        ("dollars ≤ 0.8 of Karpenter alone, ranges apart", met("dollars", 0.8)),
        ("serving pods disrupted ≤ 0.5 of Karpenter alone", evicted),
        (f"scale-up p95 per GPU size within one sync interval ({sync:g} s) of alone",
         all(p95) if p95 else None),
        ("no worse than the profile alone in GPU node-hours",
         None if not pp else (pp["gpu_node_hours"]["ratio_of_medians"] or 9) <= 1.0),
        ("fewer serving pods disrupted than the profile alone, ranges apart",
         None if not pp else (pp["serving_pods_disrupted"]["ratio_of_medians"] or 9) < 1.0
         and pp["serving_pods_disrupted"]["ranges_apart"]),
    ]  # fmt: skip


def limits(r: dict[str, Any]) -> list[str]:
    """What bounds the node-hours and dollars any lane can save, from this run."""
    alone = r["lanes"].get("karpenter-alone")
    if alone is None or not alone["gpu_node_hours"]["median"]:
        return []
    bound = r["offline_bound"]
    used = {n: lane["provisioned_over_needed"]["median"] for n, lane in r["lanes"].items()}
    said = (
        " the GPU-hours each lane provisioned are this close to the GPU-hours its replicas"
        f" asked for (provisioned / asked, median): {used}."
        if r.get(GPUS_FROM_ALLOCATABLE)
        else " (this result's GPU-hours provisioned are void: GPUs undercounted, see the README)."
    )
    hours = bound["gpu_node_hours"] / alone["gpu_node_hours"]["median"]
    dollars = bound["gpu_dollars"] / alone["gpu_dollars"]["median"]
    return [
        f"Even the offline bound is {hours:.2f} of Karpenter alone's GPU node-hours and"
        f" {dollars:.2f} of its GPU dollars{',' if r.get(GPUS_FROM_ALLOCATABLE) else ''}"
        + said
        + " Karpenter alone saves node-hours by consolidating underused nodes, which evicts"
        " serving pods.",
    ]


def section_b7(r: dict[str, Any]) -> list[str]:
    p = r["plan"]
    checks = goals(r)
    bound = r["offline_bound"]
    return [
        "## B7: a day of LLM serving under a real Karpenter",
        f"ServeGen's 10-minute request rates for five models (Alibaba Model Studio, Apache-2.0;"
        f" Xiang et al. 2025) drive six Deployments, {p['trace_hours']} hours from"
        f" {p['first_bucket_clock']}, {p['compression']:g}x compressed ({p['replay_seconds']} s per"
        f" run). GPUs per replica: {p['gpus_per_replica']}. Replicas follow each model's rate as"
        " an HPA would (External metric, AverageValue target; tolerance 0.1, default rate rules):"
        f" sync {p['hpa_sync_s']} s, scale-down stabilization {p['hpa_scale_down_window_s']} s,"
        f" Karpenter's consolidateAfter {p['consolidate_after_s']} s and a replica's start-up"
        f" {p['startup_s']} s of replay; {p['scale_steps']} scale steps, the same in every run."
        f" Replicas, low and peak: {p['replicas_low_peak']}.",
        "",
        f"Each lane ran {r['repeats']} time(s) on a fresh cluster of Karpenter's nodes only"
        " (KWOK provider v1.15; the CPU and GPU NodePools, spot and on-demand; the GPU pool"
        " taints nvidia.com/gpu, which the GPU replicas tolerate, and consolidates"
        f" {r.get('gpu_consolidation', 'WhenEmptyOrUnderutilized')}). Cells are the"
        " median (min-max); a ratio of medians is **real** only when the two ranges do not"
        " overlap. Hours and dollars are on the trace's clock (replay x compression).",
        "",
        *figures_table(r),
        "",
        *pending_table(r),
        "",
        f"GPU-hours the replicas asked for: {r['gpu_hours_needed']}. Offline bound (every"
        " instant packed onto as few 8-GPU nodes as hold it, and onto the cheapest spot nodes):"
        f" {bound['gpu_node_hours']} GPU node-hours, ${bound['gpu_dollars']} of GPU nodes.",
        "",
        *[
            f"- {goal}: {'met' if ok else 'not met' if ok is not None else 'not measured'}"
            for goal, ok in checks
        ],
        "",
        *limits(r),
        "",
        *audit_lines(r),
        "",
        "![B7](results/b7-serving.png)",
    ]


def section_b7_when_empty(r: dict[str, Any]) -> list[str]:
    """B7 again with a GPU pool that never moves GPU pods (consolidationPolicy WhenEmpty)."""
    p = r["plan"]
    return [
        "### B7 with GPU pools that consolidate only empty nodes",
        f"The same lanes over {p['trace_hours']} hours from {p['first_bucket_clock']}"
        f" ({r['repeats']} run(s) each), with the GPU NodePool's consolidationPolicy"
        f" {r.get('gpu_consolidation')}: Karpenter removes a GPU node only once no GPU pod is on"
        " it, as many GPU inference pools are set so that serving pods are never evicted.",
        "",
        *figures_table(r),
        "",
        *pending_table(r),
        "",
        *limits(r),
        "",
        *audit_lines(r),
        "",
        "![B7, WhenEmpty](results/b7-serving-when-empty.png)",
    ]
