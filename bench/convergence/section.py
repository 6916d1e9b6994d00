"""B1's and B2's sections of bench/REPORT.md."""

from __future__ import annotations

import json
from typing import Any

from bench import charts
from bench.charts import bars, header, row


def section_b1(r: dict[str, Any]) -> list[str]:
    img = bars(
        "b1-convergence",
        "B1: cost patches per second",
        ["raw loop", "watching client", "controller"],
        [
            r["baseline_patches_per_second"],
            r.get("watching_patches_per_second", 0),
            r["operator_patches_per_second"],
        ],
        "patches/s",
    )
    return [
        "## B1: convergence",
        f"{r['pods']} pods in ReplicaSets on {r['nodes']} KWOK nodes, {r['concurrency']} patches in flight.",
        "The controller's time runs from process start (login, streaming the cluster, sync) until",
        "the last pod carries its final cost. The raw loop only sends the precomputed patches; the",
        "watching client first streams every pod and keeps its watch open while it sends them.",
        "",
        *header("", "seconds", "patches/s"),
        row("raw asyncio loop", r["baseline_seconds"], r["baseline_patches_per_second"]),
        row(
            "bare watching client", r.get("watching_seconds"), r.get("watching_patches_per_second")
        ),
        row("controller", r["operator_seconds"], r["operator_patches_per_second"]),
        "",
        f"**Ratio vs the watching client {r.get('ratio_vs_watching')}** (acceptance ≥ 0.8, goal ≥ 0.95);"
        f" **vs the raw loop {r['ratio']}** (acceptance ≥ 0.7, goal ≥ 0.9).",
        f"Redundant writes: **{r['redundant_writes']}**; writes after a restart:"
        f" **{r['writes_after_restart']}** (both from the audit log).",
        f"CPU: {r.get('cpu_seconds')} s of the controller for {r.get('pod_events')} pod events,"
        f" **{r.get('cpu_seconds_per_1000_pod_events')} s per 1,000 pod events** (from /proc).",
        "",
        "A separate, profiled convergence: [profiles/b1-operator.txt](profiles/b1-operator.txt).",
        "",
        f"![B1]({img})",
    ]


def _b2_points() -> list[dict[str, Any]]:
    """B2 results of every scale measured, fewest pods first."""
    found = [json.loads(p.read_text()) for p in charts.RESULTS.glob("b2-memory-*.json")]
    return sorted((r for r in found if "error" not in r), key=lambda r: r["pods"])


def section_b2(r: dict[str, Any]) -> list[str]:
    img = bars(
        "b2-memory",
        "B2: peak RSS",
        ["floor", "webhook", "controller"],
        [r["floor_mib"], r["webhook_peak_rss_mib"], r["operator_peak_rss_mib"]],
        "MiB",
    )
    lines = [
        "## B2: memory",
        f"Peak RSS (VmHWM) holding {r['pods']} pods and {r['nodes']} nodes.",
        "",
        "| | peak RSS (MiB) |",
        "|---|---|",
        f"| floor: interpreter with our imports ({r['floor_idle_interpreter_mib']} MiB) + encoded records"
        f" ({r['floor_held_bytes_per_pod']} B per pod) | {r['floor_mib']} |",
        f"| webhook (`schedpolicy webhook`; idle after sync {r['webhook_idle_rss_mib']}) | {r['webhook_peak_rss_mib']} |",
        f"| controller (after convergence {r['operator_rss_after_convergence_mib']}) | {r['operator_peak_rss_mib']} |",
        "",
        f"Controller {r['operator_peak_rss_mib']} MiB at this scale, {r['ratio_to_floor']} times the floor.",
        "",
    ]
    points = _b2_points()
    # The goals are set at 10k pods on 1k nodes, whichever scale this section shows.
    at_10k = next((p for p in points if p["pods"] == 10_000), None)
    if at_10k is not None:
        lines += [
            f"**Controller at 10k pods: {at_10k['operator_peak_rss_mib']} MiB** (acceptance ≤ 200,"
            " goal ≤ 150).",
            "",
        ]
    if len(points) >= 2:
        low, high = points[-2], points[-1]
        slope = (
            (high["operator_peak_rss_mib"] - low["operator_peak_rss_mib"])
            * 2**20
            / (high["pods"] - low["pods"])
        )
        at_150k = high["operator_peak_rss_mib"] + slope * (150_000 - high["pods"]) / 2**20
        rows = [
            f"| {p['scale']} | {p['pods']} | {p['nodes']} | {p['operator_peak_rss_mib']} |"
            f" {p['webhook_peak_rss_mib']} | {p.get('measured_on', 'before 2026-12-07')} |"
            for p in points
        ]
        lines += [
            "| scale | pods | nodes | controller MiB | webhook MiB | measured |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"**Marginal {slope / 1024:.2f} KiB per pod** (with its share of nodes; the slope between"
            f" {low['scale']} and {high['scale']}; acceptance ≤ 4 KiB, goal ≤ 2 KiB). Extrapolated to"
            f" 150k pods on 5k nodes: **{at_150k:.0f} MiB**. Points measured on different days"
            " can straddle a change to the controller's records; B8 fits the slope from 30k to"
            " 150k pods in one run.",
            "",
        ]
    else:
        lines += [
            "Only one scale measured: run `make bench SCALE=large ONLY=B2` for the slope.",
            "",
        ]
    return [*lines, f"![B2]({img})"]
