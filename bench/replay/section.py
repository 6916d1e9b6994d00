"""The tables every replay benchmark's report section shows: what each lane ran, each figure
per lane as median (min-max), the comparisons the benchmark asks for (ratios of medians, and
whether the ranges are apart), scale-up pending per GPU size, and the audit of the operator's
writes in the product lanes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.replay import lane_spec
from bench.replay.waves import GPUS_FROM_ALLOCATABLE, spec_record
from localcluster.karpenter import BATCH_IDLE_SECONDS, BATCH_MAX_SECONDS, REPLAY_TIMERS

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


# Counted from each node's GPUs: void in results from before that count read allocatable.
PROVISIONED = {"gpu_hours_provisioned", "provisioned_over_needed"}


def cell(s: dict[str, float | None]) -> str:
    if s["median"] is None:
        return "-"
    if s["min"] == s["max"]:
        return f"{s['median']:g}"
    return f"{s['median']:g} ({s['min']:g}-{s['max']:g})"


def verdict(c: dict[str, Any]) -> str:
    ratio = c["ratio_of_medians"]
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x" + (" **real**" if c["ranges_apart"] else " (ranges overlap)")


def normalised(r: dict[str, Any]) -> dict[str, Any]:
    """A result in today's shape: results from before the lanes were data keyed their
    comparisons by lane ("product", "product_vs_profile") and named no lane's settings."""
    if "lane_specs" in r:
        return r
    known, _ = lane_spec.read()
    old_keys = {"product_vs_profile": "product / profile"}
    compared = {
        old_keys.get(k, f"{k} / karpenter-alone"): v for k, v in r.get("compared", {}).items()
    }
    specs = {name: spec_record(known[name]) for name in r["lanes"] if name in known}
    return {**r, "compared": compared, "lane_specs": specs, "baseline": "karpenter-alone"}


def lanes_list(r: dict[str, Any]) -> list[str]:
    """What each lane ran, from its spec."""
    out = []
    for name, spec in r["lane_specs"].items():
        parts = []
        if spec.get("policy") is not None:
            parts.append(
                "the operator under the benchmark's policy"
                + (f" with {spec['policy']}" if spec["policy"] else "")
            )
        elif spec.get("scheduler"):
            parts.append(f"pods naming {spec['scheduler']}")
        gates = [g for g, on in (spec.get("karpenter_gates") or {}).items() if on]
        if gates:
            parts.append("Karpenter's " + ", ".join(gates) + " gate")
        if spec.get("gpu_consolidation", "WhenEmptyOrUnderutilized") != "WhenEmptyOrUnderutilized":
            parts.append(f"GPU pool {spec['gpu_consolidation']}")
        for key, value in (spec.get("gpu_pod_annotations") or {}).items():
            parts.append(f"GPU pods annotated {key}: {value}")
        if spec.get("headroom"):
            gpus = spec.get("headroom_gpus", 1)
            parts.append(
                f"the chart's GPU headroom: {spec['headroom']} placeholder(s) of {gpus} GPU"
            )
        out.append(
            f"- `{name}` ({spec.get('label', name)}): " + ("; ".join(parts) or "nothing added")
        )
    return out


def figures_table(r: dict[str, Any]) -> list[str]:
    """Each figure per lane, median (min-max)."""
    lanes = r["lanes"]
    names = list(lanes)
    rows = [
        "| figure (trace clock) | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    void = set() if r.get(GPUS_FROM_ALLOCATABLE) else PROVISIONED
    for key, title in FIGURE_NAMES.items():
        if key in void:
            void_row = "void in this result: GPUs undercounted (see docs/benchmarks.md)"
            rows.append(f"| {title} | {void_row} |")
            continue
        rows.append(f"| {title} | " + " | ".join(cell(lanes[n][key]) for n in names) + " |")
    return rows


COMPARED = ("serving_pods_evicted", "gpu_dollars", "gpu_node_hours", "dollars")


def comparisons_table(r: dict[str, Any]) -> list[str]:
    """Every comparison the benchmark asks for: the ratio of medians, and whether the ranges
    are apart."""
    compared = r["compared"]
    if not compared:
        return []
    rows = [
        "| lane / against | " + " | ".join(FIGURE_NAMES[k] for k in COMPARED) + " |",
        "|---|" + "---|" * len(COMPARED),
    ]
    for pair, c in compared.items():
        rows.append(f"| {pair} | " + " | ".join(verdict(c[k]) for k in COMPARED) + " |")
    return rows


def pending_table(r: dict[str, Any]) -> list[str]:
    lanes = r["lanes"]
    names = list(lanes)
    sizes = sorted({s for n in names for s in lanes[n]["pending_p95_s"]}, key=int)
    rows = [
        "| scale-up pending, s (p50 / p95) | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for size in sizes:
        cells = [
            f"{cell(lanes[n]['pending_p50_s'][size])} / {cell(lanes[n]['pending_p95_s'][size])}"
            + _launched(lanes[n].get("pending_on_new_node", {}).get(size))
            if size in lanes[n]["pending_p95_s"]
            else "-"
            for n in names
        ]
        label = f"{size}-GPU replicas" if size != "0" else "CPU replicas"
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return rows


def _launched(spread: dict[str, float] | None) -> str:
    """How many of a run's scale-ups waited for a node launched after them (median)."""
    return "" if spread is None else f" ({cell(spread)} on a new node)"


def audit_lines(r: dict[str, Any]) -> list[str]:
    """The operator's writes in each product run, judged from that cluster's audit log."""
    audits = [run["operator_writes"] for run in r["runs"] if run.get("operator_writes")]
    if not audits:
        return []

    def total(key: str) -> int:
        return sum(int(a.get(key) or 0) for a in audits)

    clock = all(a.get("gone_clock") == "apiserver" for a in audits)
    judged = (
        "judged against each object's deletion and removal as the apiserver's audit log"
        " recorded them (one clock, objects by UID)"
        if clock
        else "judged against the time a watch saw each object go (a result from before the"
        " audit read removals from the log)"
    )
    return [
        f"The operator's writes over {len(audits)} product run(s), from the audit logs,"
        f" {judged}: {total('writes')} writes; {total('to_gone')} reached a pod or node"
        f" already removed ({total('refused_not_found')} refused as not found,"
        f" **{total('succeeded_after_gone')} accepted**);"
        f" {total('accepted_while_deleting')} accepted while the object was terminating"
        f" ({total('deleting_beyond_owned')} of them touching more than its own keys);"
        f" {total('refused_guard')} refused by their UID or resourceVersion guard;"
        f" {total('unowned')} outside what it owns; {total('changed_hands_twice')} cost values"
        " that changed hands twice.",
    ]


def timers_table(r: dict[str, Any]) -> list[str]:
    """Every timer that shapes a replay, real and as replayed, and how often each lane's
    deletion-cost writer refreshes, in trace seconds."""
    p = r["plan"]
    k = float(p["compression"])
    scale = float(p.get("karpenter_time_scale", 1))
    rows = [
        "| timer | where | real (trace) s | replayed s |",
        "|---|---|---|---|",
        f"| HPA sync period | the plan's HPA | {p['hpa_sync_s'] * k:g} | {p['hpa_sync_s']:g} |",
        f"| HPA scale-down stabilization | the plan's HPA | {p['hpa_scale_down_window_s'] * k:g}"
        f" | {p['hpa_scale_down_window_s']:g} |",
        f"| consolidateAfter | the NodePools | {p['consolidate_after_s'] * k:g}"
        f" | {p['consolidate_after_s']:g} |",
        f"| a node's boot | the KWOK node class | {p.get('node_boot_s', 0) * k:g}"
        f" | {p.get('node_boot_s', 0):g} |",
        f"| a replica's start-up | KWOK's pod-ready delay | {p['startup_s'] * k:g}"
        f" | {p['startup_s']:g} |",
    ]
    for name, package, seconds, what in REPLAY_TIMERS:
        rows.append(
            f"| `{name}`: {what} | Karpenter {package} | {seconds:g} | {seconds / scale:g} |"
        )
    rows.append(
        f"| batch idle / max | Karpenter's provisioner | {BATCH_IDLE_SECONDS:g} /"
        f" {BATCH_MAX_SECONDS:g} | {BATCH_IDLE_SECONDS / scale:g} / {BATCH_MAX_SECONDS / scale:g} |"
    )
    return [
        *rows,
        "",
        "How often each lane's deletion-cost writer refreshes, in trace seconds: Karpenter alone"
        " and the profile lanes write none; Karpenter's gate ranks and writes every 60 when its"
        " cluster state changed, at least every 300, at most 50 nodes a cycle; the product"
        " writes on every change its watch brings (under a second of replay), at most once per"
        f" pod per {k:g} (minUpdateIntervalSeconds 1 of replay); beside the gate it leaves"
        " pod-deletion-cost on Karpenter's nodes to the gate and writes"
        " karpenter.sh/disruption-cost on the same clock.",
    ]


def lanes_headline(tag: str) -> Callable[[dict[str, Any]], str]:
    """The last line a replay benchmark prints: each lane's median GPU node-hours, dollars and
    serving pods disrupted."""

    def headline(r: dict[str, Any]) -> str:
        return f"{tag} " + "; ".join(
            f"{name}: {lane['gpu_node_hours']['median']} GPU node-h,"
            f" ${lane['dollars']['median']}, {lane['serving_pods_disrupted']['median']} serving"
            " pods disrupted"
            for name, lane in r["lanes"].items()
        )

    return headline
