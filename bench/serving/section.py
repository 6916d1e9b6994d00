"""B7's section of bench/REPORT.md, from bench/results/b7-serving.json."""

from __future__ import annotations

from typing import Any

FIGURE_NAMES = {
    "gpu_node_hours": "GPU node-hours",
    "gpu_dollars": "GPU $",
    "dollars": "all $",
    "serving_pods_disrupted": "serving pods disrupted",
    "serving_pods_evicted": "of them evicted",
    "gpu_hours_provisioned": "GPU-hours provisioned",
    "provisioned_over_needed": "provisioned / needed",
    "nodes_launched": "nodes launched",
    "nodes_emptied": "nodes emptied",
    "nodes_consolidated_moving_pods": "nodes consolidated by moving pods",
}


def _range(s: dict[str, float | None]) -> str:
    if s["median"] is None:
        return "-"
    if s["min"] == s["max"]:
        return f"{s['median']:g}"
    return f"{s['median']:g} ({s['min']:g}-{s['max']:g})"


def _verdict(c: dict[str, Any]) -> str:
    ratio = c["ratio_of_medians"]
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x" + (" **real**" if c["ranges_apart"] else " (ranges overlap)")


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
        ("fewer serving pods disrupted than the profile alone",
         None if not pp else lanes["product"]["serving_pods_disrupted"]["median"]
         < lanes["profile"]["serving_pods_disrupted"]["median"]),
    ]  # fmt: skip


def section_b7(r: dict[str, Any]) -> list[str]:
    p, lanes = r["plan"], r["lanes"]
    names = list(lanes)
    header = (
        "| figure (trace clock) | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{n} / alone" for n in r["compared"] if n != "product_vs_profile")
        + " | product / profile |"
    )
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    for key, title in FIGURE_NAMES.items():
        cells = [_range(lanes[n][key]) for n in names]
        ratios = [_verdict(c[key]) for n, c in r["compared"].items() if n != "product_vs_profile"]
        pp = r["compared"].get("product_vs_profile")
        rows.append(
            f"| {title} | " + " | ".join([*cells, *ratios, _verdict(pp[key]) if pp else "-"]) + " |"
        )
    sizes = sorted({s for n in names for s in lanes[n]["pending_p95_s"]}, key=int)
    pend = [
        "| scale-up pending, s (p50 / p95) | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for size in sizes:
        cells = [
            f"{_range(lanes[n]['pending_p50_s'][size])} / {_range(lanes[n]['pending_p95_s'][size])}"
            for n in names
        ]
        label = f"{size}-GPU replicas" if size != "0" else "CPU frontends"
        pend.append(f"| {label} | " + " | ".join(cells) + " |")
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
        " (KWOK provider v1.15; the CPU and GPU NodePools, spot and on-demand). Cells are the"
        " median (min-max); a ratio of medians is **real** only when the two ranges do not"
        " overlap. Hours and dollars are on the trace's clock (replay x compression).",
        "",
        *rows,
        "",
        *pend,
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
        "![B7](results/b7-serving.png)",
    ]
