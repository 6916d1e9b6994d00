"""B7's and B7E's sections of bench/REPORT.md, from bench/results/b7-serving*.json and
b7e-no-eviction*.json: the lanes, the figures, the comparisons, and the acceptance with the
bound each line sits above."""

from __future__ import annotations

from typing import Any

from bench.replay.section import (
    audit_lines,
    comparisons_table,
    figures_table,
    lanes_list,
    normalised,
    pending_table,
    timers_table,
)
from bench.replay.waves import GPUS_FROM_ALLOCATABLE

Goal = tuple[str, bool | None]


def _ratio(r: dict[str, Any], pair: str, key: str) -> tuple[float | None, bool]:
    c = r["compared"].get(pair, {}).get(key)
    return (None, False) if c is None else (c["ratio_of_medians"], c["ranges_apart"])


def _at_most(r: dict[str, Any], pair: str, key: str, most: float, apart: bool) -> bool | None:
    ratio, is_apart = _ratio(r, pair, key)
    if ratio is None:
        return None
    return ratio <= most and (is_apart or not apart)


def _fewer(r: dict[str, Any], pair: str, key: str) -> bool | None:
    ratio, is_apart = _ratio(r, pair, key)
    return None if ratio is None else ratio < 1 and is_apart


def scale_up_within(r: dict[str, Any], lane: str, against: str) -> bool | None:
    """Whether `lane`'s scale-up p95 (median of runs) is within one HPA sync interval of
    `against`'s, for every GPU size both have."""
    lanes = r["lanes"]
    if lane not in lanes or against not in lanes:
        return None
    sync = r["plan"]["hpa_sync_s"] * r["plan"]["compression"]
    found = []
    for size, spread in lanes[lane]["pending_p95_s"].items():
        base = lanes[against]["pending_p95_s"].get(size, {}).get("median")
        if spread["median"] is not None and base is not None:
            found.append(spread["median"] <= base + sync)
    return all(found) if found else None


def _bound_line(r: dict[str, Any], against: str) -> str:
    lanes, bound = r["lanes"], r["offline_bound"]
    base = lanes.get(against, {}).get("gpu_dollars", {}).get("median")
    share = f", {bound['gpu_dollars'] / base:.2f} of {against}'s" if base else ""
    return (
        f"Bounds: 0 serving pods evicted; the offline packing bound, ${bound['gpu_dollars']} of"
        f" GPU nodes{share} and {bound['gpu_node_hours']} GPU node-hours (every instant's"
        " replicas on as few 8-GPU nodes as hold them, on the cheapest spot nodes, with no"
        " launch time and no HPA window)."
    )


def goals_b7(r: dict[str, Any]) -> list[Goal]:
    gate, vs_gate, vs_profile = (
        "karpenter-gate",
        "product / karpenter-gate",
        "product / profile-gate",
    )
    sync = r["plan"]["hpa_sync_s"] * r["plan"]["compression"]
    return [
        ("serving pods evicted ≤ 0.6 of Karpenter + its gate, ranges apart (bound 0)",
         _at_most(r, vs_gate, "serving_pods_evicted", 0.6, apart=True)),
        ("GPU dollars ≤ 1.0 of Karpenter + its gate, ranges apart (bound: the offline packing)",
         _at_most(r, vs_gate, "gpu_dollars", 1.0, apart=True)),
        ("GPU node-hours ≤ 1.02 of Karpenter + its gate, overlap allowed",
         _at_most(r, vs_gate, "gpu_node_hours", 1.02, apart=False)),
        ("fewer serving pods evicted than profile + gate, ranges apart",
         _fewer(r, vs_profile, "serving_pods_evicted")),
        (f"scale-up p95 per GPU size within one HPA sync interval ({sync:g} s) of {gate}",
         scale_up_within(r, "product", gate)),
        ("product beside the gate: serving pods evicted ≤ 0.6 of Karpenter + its gate,"
         " ranges apart", _at_most(r, "product-gate / karpenter-gate", "serving_pods_evicted",
                                   0.6, apart=True)),
        ("product beside the gate: fewer serving pods evicted than profile + gate, ranges apart",
         _fewer(r, "product-gate / profile-gate", "serving_pods_evicted")),
        (f"product beside the gate: scale-up p95 within {sync:g} s of {gate}",
         scale_up_within(r, "product-gate", gate)),
        (f"the same with the chart's GPU headroom: scale-up p95 within {sync:g} s of {gate}",
         scale_up_within(r, "product-gate-headroom", gate)),
    ]  # fmt: skip


def goals_b7e(r: dict[str, Any]) -> list[Goal]:
    lanes = r["lanes"]
    product = lanes.get("when-empty-product")
    evicted = None if product is None else product["serving_pods_evicted"]["max"] == 0
    out: list[Goal] = [("WhenEmpty + schedpolicy: 0 serving pods evicted (bound 0)", evicted)]
    for against in ("when-empty-alone", "when-empty-gate"):
        out.append(
            (
                f"WhenEmpty + schedpolicy: GPU dollars ≤ 0.95 of {against}, ranges apart",
                _at_most(r, f"when-empty-product / {against}", "gpu_dollars", 0.95, apart=True),
            )
        )
    return out


def _goal_lines(goals: list[Goal]) -> list[str]:
    return [
        f"- {goal}: {'met' if ok else 'not met' if ok is not None else 'not measured'}"
        for goal, ok in goals
    ]


def _method(r: dict[str, Any]) -> list[str]:
    p = r["plan"]
    waves = -(-len(r["runs"]) // max(1, r.get("parallel", len(r["runs"]))))
    return [
        f"ServeGen's 10-minute request rates for five models (Alibaba Model Studio, Apache-2.0;"
        f" Xiang et al. 2025), day {r.get('day', 0)}, drive six Deployments,"
        f" {p['trace_hours']} hours from {p['first_bucket_clock']}, {p['compression']:g}x"
        f" compressed ({p['replay_seconds']} s per run). GPUs per replica:"
        f" {p['gpus_per_replica']}. Replicas follow each model's rate as an HPA would (External"
        " metric, AverageValue target; tolerance 0.1, default rate rules). Every timer that"
        " shapes the result runs on the trace's clock, divided by the compression: HPA's sync"
        f" {p['hpa_sync_s']} s and scale-down window {p['hpa_scale_down_window_s']} s of replay,"
        f" consolidateAfter {p['consolidate_after_s']} s, a node's boot"
        f" {p.get('node_boot_s', 0)} s, a replica's start-up {p['startup_s']} s, and Karpenter's"
        " own fixed timers (`tools/karpenter/replay-timers.patch`, scale"
        f" {p.get('karpenter_time_scale', 1):g}; each below). {p['scale_steps']} scale steps,"
        f" the same in every run. Replicas, low and peak: {p['replicas_low_peak']}.",
        "",
        *(timers_table(r) if "karpenter_time_scale" in p else []),
        "",
        f"Each lane ran {r['repeats']} time(s), each on a fresh cluster of Karpenter's nodes"
        f" only (KWOK provider v1.15), {waves} wave(s) of runs side by side, every lane in every"
        " wave. The GPU pool taints nvidia.com/gpu, which the GPU replicas tolerate. Cells are"
        " the median (min-max); a ratio of medians is **real** only when the two ranges do not"
        " overlap. Hours and dollars are on the trace's clock (replay x compression). The lanes:",
        "",
        *lanes_list(r),
    ]


def _tables(r: dict[str, Any]) -> list[str]:
    return [
        *figures_table(r),
        "",
        *comparisons_table(r),
        "",
        *pending_table(r),
        "",
        f"GPU-hours the replicas asked for: {r['gpu_hours_needed']}.",
    ]


def limits(r: dict[str, Any]) -> list[str]:
    """How close each lane came to provisioning only what its replicas asked for."""
    if not r.get(GPUS_FROM_ALLOCATABLE):
        return ["(This result's GPU-hours provisioned are void: GPUs undercounted.)"]
    used = {n: lane["provisioned_over_needed"]["median"] for n, lane in r["lanes"].items()}
    return [f"GPU-hours provisioned over those asked for, median by lane: {used}."]


def section_b7(raw: dict[str, Any]) -> list[str]:
    r = normalised(raw)
    stem = "b7-serving" if not r.get("day") else f"b7-serving-day{r['day']}"
    return [
        f"## B7: a day of LLM serving under a real Karpenter (ServeGen day {r.get('day', 0)})",
        *_method(r),
        "",
        *_tables(r),
        "",
        _bound_line(r, "karpenter-gate" if "karpenter-gate" in r["lanes"] else r["baseline"]),
        "",
        *_goal_lines(goals_b7(r)),
        "",
        *limits(r),
        "",
        *audit_lines(r),
        "",
        f"![{stem}](results/{stem}.png)",
        "",
        f"![{stem}, dollars against evictions](results/{stem}-choice.png)"
        if "lane_specs" in raw
        else "",
    ]


def section_b7e(raw: dict[str, Any]) -> list[str]:
    r = normalised(raw)
    stem = "b7e-no-eviction" if not r.get("day") else f"b7e-no-eviction-day{r['day']}"
    return [
        f"## B7E: the configurations that evict no serving pod (ServeGen day {r.get('day', 0)})",
        "The same load as B7, under what a user would switch on so that Karpenter never"
        " evicts a serving pod: a GPU NodePool that consolidates only empty nodes (WhenEmpty),"
        " or `karpenter.sh/do-not-disrupt` on the GPU pods. The question is what each costs"
        " in dollars, and what the product saves there.",
        "",
        *_method(r),
        "",
        *_tables(r),
        "",
        _bound_line(r, r["baseline"]),
        "",
        *_goal_lines(goals_b7e(r)),
        "",
        *limits(r),
        "",
        *audit_lines(r),
        "",
        f"![{stem}](results/{stem}.png)",
        "",
        f"![{stem}, dollars against evictions](results/{stem}-choice.png)",
    ]
