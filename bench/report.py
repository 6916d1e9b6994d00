"""bench/REPORT.md and its plots, from bench/results/*.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.gpu_hours import section_b6
from bench.serving.section import section_b7

HERE = Path(__file__).parent
RESULTS = HERE / "results"
REPORT = HERE / "REPORT.md"
ORDER = (
    "b1-convergence",
    "b2-memory",
    "b3-webhook",
    "b4-packing",
    "b4-dra-packing",
    "b4c-churn",
    "b5-scaledown",
    "b5g-gpu-scaledown",
    "b6-gpu-hours",
    "b7-serving",
)


def load() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}


def bars(name: str, title: str, labels: list[str], values: list[float], unit: str) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"][: len(values)]
    ax.bar(labels, values, color=colors)
    for i, v in enumerate(values):
        ax.annotate(f"{v:g}", (i, v), ha="center", va="bottom")
    ax.set_title(title)
    ax.set_ylabel(unit)
    fig.tight_layout()
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"results/{path.name}"


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
        "| | seconds | patches/s |",
        "|---|---|---|",
        f"| raw asyncio loop | {r['baseline_seconds']} | {r['baseline_patches_per_second']} |",
        f"| bare watching client | {r.get('watching_seconds')} | {r.get('watching_patches_per_second')} |",
        f"| controller | {r['operator_seconds']} | {r['operator_patches_per_second']} |",
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
    found = [json.loads(p.read_text()) for p in RESULTS.glob("b2-memory-*.json")]
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
            f"| {p['scale']} | {p['pods']} | {p['nodes']} | {p['operator_peak_rss_mib']} | {p['webhook_peak_rss_mib']} |"
            for p in points
        ]
        lines += [
            "| scale | pods | nodes | controller MiB | webhook MiB |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"**Marginal {slope / 1024:.2f} KiB per pod** (with its share of nodes; the slope between"
            f" {low['scale']} and {high['scale']}; acceptance ≤ 4 KiB, goal ≤ 2 KiB). Extrapolated to"
            f" 150k pods on 5k nodes: **{at_150k:.0f} MiB**.",
            "",
        ]
    else:
        lines += [
            "Only one scale measured: run `make bench SCALE=large ONLY=B2` for the slope.",
            "",
        ]
    return [*lines, f"![B2]({img})"]


_LANES = {
    "none": "no admission",
    "compiled": "compiled MutatingAdmissionPolicy",
    "webhook": "our webhook",
    "python_null": "Python null webhook",
    "go_null": "Go null webhook",
}


def b3_lanes(r: dict[str, Any]) -> list[str]:
    """Every admission path under the same load and burst, in one run."""
    lines = [
        "Each admission path under the same load and the same burst, in this run. Load creates"
        " are timed one by one by the apiserver (its audit log: receipt to response); burst"
        " shares are those of `apiserver_request_duration_seconds` at its 25 ms bucket.",
        "",
        "| lane | create p50 (ms) | create p99 (ms) | added p99 | burst creates ≤ 25 ms"
        " | burst webhook calls < 25 ms | burst pods without hints |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, lane in r["lanes"].items():
        b = lane["burst"]
        ratio = lane.get("added_p99_ratio")
        added = f"{lane['added_p99_ms']} ms ({ratio:+.1%})" if ratio is not None else "-"
        calls = f"{b['share_under_25ms']:.1%}" if b["bucket_shares"] else "no calls"
        lines.append(
            f"| {_LANES.get(key, key)} | {lane['create_p50_ms']} | {lane['create_p99_ms']}"
            f" | {added} | {b['create_share_under_25ms']:.1%} | {calls}"
            f" | {b['pods_without_hints']} |"
        )
    gain = r.get("compiled_gain") or {}
    if gain:
        lines += [
            "",
            f"**Compiled, one load and one burst**: added create p99 {gain['added_p99_ratio']:+.1%} over no admission"
            " (acceptance ≤ +5%); burst creates under 25 ms"
            f" {gain['burst_create_share_under_25ms']:.1%} against"
            f" {gain['no_admission_burst_create_share_under_25ms']:.1%} with no admission"
            " (acceptance: at most 5 points fewer); burst pods without hints"
            f" {gain['burst_pods_without_hints']} (acceptance 0).",
        ]
    lines += b3_in_turn(r)
    return lines


def b3_in_turn(r: dict[str, Any]) -> list[str]:
    """The acceptance's lanes taken in turn: pooled over rounds, with each round's figure."""
    turns = r.get("in_turn") or {}
    if not turns:
        return []
    rounds = len(next(iter(turns.values()))["create_share_under_25ms"])
    lines = [
        "",
        f"**In turn** ({rounds} rounds; in each, every lane takes the same load and then the"
        " same burst, in a rotating order, with no webhook registered). The floor policy only"
        " sets the scheduler the compiled one sets: what any mutating admission policy costs"
        " here. In the second lane the pods name that scheduler themselves, with no admission:"
        " the scheduler profile's own cost, the same in the last three lanes. Creates are"
        " timed one by one from the audit log.",
        "",
        "| lane | load creates | load p50 (ms) | load p99 (ms) | p99 by round | burst p50 (ms)"
        " | burst creates ≤ 25 ms, mean (by round) | burst pods without hints |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, lane in turns.items():
        by_round = ", ".join(f"{v:g}" for v in lane["load_p99_ms_by_round"])
        shares = ", ".join(f"{v:.0%}" for v in lane["create_share_under_25ms"])
        hints = str(sum(lane["pods_without_hints"])) if name == "compiled" else "(not hinted)"
        lines.append(
            f"| {_ALTERNATING.get(name, name)} | {lane['load_creates']} | {lane['load_p50_ms']}"
            f" | {lane['load_p99_ms']} | {by_round} | {lane['burst_p50_ms']}"
            f" | {lane['mean_create_share_under_25ms']:.1%} ({shares}) | {hints} |"
        )
    gain = r["compiled_gain"]
    means = gain["in_turn_mean_share_under_25ms"]
    lines += [
        "",
        f"**Compiled, in turn**: load p99 {gain['in_turn_added_p99_ratio']:+.1%} over no"
        f" admission (acceptance ≤ +5%; the floor policy {gain['in_turn_floor_added_p99_ratio']:+.1%},"
        f" the compiled one over the floor {gain['in_turn_compiled_over_floor_p99_ratio']:+.1%},"
        " over pods naming our scheduler"
        f" {gain['in_turn_compiled_over_scheduler_p99_ratio']:+.1%});"
        f" burst creates ≤ 25 ms {means['compiled']:.1%} against {means['none']:.1%} with no"
        f" admission (acceptance: at most 5 points fewer; the floor {means['floor']:.1%},"
        f" pods naming our scheduler {means['scheduler']:.1%});"
        f" burst pods without hints {gain['in_turn_pods_without_hints']} (acceptance 0).",
    ]
    return lines


_ALTERNATING = {
    "none": "no admission",
    "scheduler": "no admission, pods naming our scheduler",
    "floor": "floor policy",
    "compiled": "compiled",
}


def section_b3(r: dict[str, Any]) -> list[str]:
    img = bars(
        "b3-webhook",
        "B3: pod create latency p99",
        ["create, no webhook", "create, webhook", "webhook (apiserver)", "webhook (own)"],
        [
            r["create_p99_ms_without"],
            r["create_p99_ms_with"],
            r["webhook_p99_ms"],
            r.get("own_p99_ms", 0),
        ],
        "ms",
    )
    burst = r.get("burst") or {}
    load = (
        "while the controller converges B1's fleet in the same cluster"
        if r.get("under_load")
        else "with no other load (B1's fleet absent)"
    )
    lines = [
        "## B3: webhook latency",
        f"{r['creates']} pod creates at {r['rate_per_second']}/s {load}"
        f" ({r['pods_hinted']} pods hinted). Creates are timed one by one from the apiserver's audit"
        " log; webhook calls by the apiserver's coarse buckets (5, 25, 50, 100 ms …), interpolated",
        "within a bucket; the webhook's own histogram has buckets from 0.5 ms.",
        "",
        "| | p50 (ms) | p99 (ms) |",
        "|---|---|---|",
        f"| create, no webhook | {r['create_p50_ms_without']} | {r['create_p99_ms_without']} |",
        f"| create, with webhook | {r['create_p50_ms_with']} | {r['create_p99_ms_with']} |",
        f"| webhook admission (apiserver's histogram) | {r['webhook_p50_ms']} | {r['webhook_p99_ms']} |",
        f"| webhook (its own histogram) | {r.get('own_p50_ms')} | {r.get('own_p99_ms')} |",
    ]
    null = r.get("null_webhook")
    if r.get("lanes"):
        lines += ["", *b3_lanes(r)]
    elif null:
        lines += [
            f"| bare webhook admission (apiserver's histogram) | {null['webhook_p50_ms']} | {null['webhook_p99_ms']} |",
            f"| create, with the bare webhook | | {null['create_p99_ms_with']} |",
            "",
            "The bare webhook (bench/null_webhook.py) is the same aiohttp server, TLS and msgspec"
            " decoding with no view, answering `allowed` with no patch: under the same load it adds"
            f" {null['added_p99_ms']} ms to the create p99. The difference between its row and ours"
            " is our code's; the rest is what this machine's apiserver and CPU allow any webhook.",
        ]
    busy = r.get("machine_busy_share")
    if busy:
        shares = ", ".join(f"{k} {v:.1%}" for k, v in busy.items())
        lines += [
            "",
            f"Both CPUs' busy share during each run (/proc/stat): {shares}. Where the apiserver's"
            " CPU went meanwhile, with our webhook: [profiles/b3-apiserver.txt](profiles/b3-apiserver.txt).",
        ]
    for who, s in (r.get("webhook_scheduling") or {}).items():
        name = {"hooked": "our webhook", "null": "the bare webhook"}.get(who) or _LANES.get(
            who, who
        )
        lines.append(
            f"Per call, {name} ran {s['cpu_ms_per_call']} ms on a CPU and waited"
            f" {s['runqueue_wait_ms_per_call']} ms for one (/proc/<pid>/schedstat)."
        )
    lines += [
        "",
        f"**Webhook p99 {r.get('own_p99_ms')} ms** by its own histogram (acceptance ≤ 10, goal ≤ 3);"
        f" **added create p99 {r['added_p99_ms']} ms** (acceptance ≤ 20, goal ≤ 10).",
        "",
    ]
    if burst:
        shares = " · ".join(f"≤ {k}: {v:.1%}" for k, v in burst["bucket_shares"].items())
        lines += [
            f"**Burst**: {burst['deployments']} Deployments scaled from 0 to {burst['replicas_each']} each at once;"
            f" {burst['pods_created']} pods created in {burst['seconds_to_create']} s.",
            f"Webhook calls by the apiserver's buckets: {shares}.",
            f"**{burst['share_under_25ms']:.1%} under 25 ms** (acceptance ≥ 90%, goal ≥ 99%);"
            f" fail-opens **{burst['fail_opens']}**, pods without hints **{burst['pods_without_hints']}** (both must be 0).",
            "",
        ]
        null = burst.get("null_webhook")
        if null and not r.get("lanes"):
            lines += [
                "The same burst against a bare webhook (bench/null_webhook.py: the same aiohttp"
                " server, TLS and msgspec decoding, no view, answers `allowed` with no patch):"
                f" **{null['share_under_25ms']:.1%} under 25 ms**, {null['pods_created']} pods"
                f" in {null['seconds_to_create']} s. That is what this machine lets any webhook"
                " of ours reach; the gap between the two rows is our code's.",
                "",
            ]
    return [
        *lines,
        "A separate, profiled pass of the same load: [profiles/b3-webhook.txt](profiles/b3-webhook.txt).",
        "",
        f"![B3]({img})",
    ]


def section_b4(r: dict[str, Any]) -> list[str]:
    ours, default, bound = r["schedpolicy_profile"], r["default_profile"], r["ffd_bound"]
    img = bars(
        "b4-packing",
        "B4: fully free 8-GPU nodes",
        ["default profile", "schedpolicy", "FFD bound"],
        [default["free_nodes"], ours["free_nodes"], bound["free_nodes"]],
        "nodes",
    )
    return [
        "## B4: GPU packing",
        f"{r['pods']} pods (1/2/4/8 GPUs, seed {r['seed']}, {r['gpus_requested']} GPUs) on"
        f" {r['nodes']} nodes of 8 GPUs, the same stream through each profile of the real kube-scheduler.",
        "",
        "| | free nodes | 8-GPU pods still placeable | pending pods |",
        "|---|---|---|---|",
        f"| default profile | {default['free_nodes']} | {default['placeable_8gpu_pods']} | {default['pending_pods']} |",
        f"| schedpolicy-scheduler | {ours['free_nodes']} | {ours['placeable_8gpu_pods']} | {ours['pending_pods']} |",
        f"| first-fit-decreasing (offline) | {bound['free_nodes']} | {bound['placeable_8gpu_pods']} | {bound['pending_pods']} |",
        "",
        f"**{r['ratio']} of the bound** (default profile: {r['default_ratio']}); goal ≥ 0.95 and better than default.",
        "",
        f"![B4]({img})",
    ]


B4_DRA_LANES = {
    "default_claims": "default profile, ResourceClaims",
    "ours_claims": "schedpolicy-scheduler, ResourceClaims",
    "default_extended": "default profile, nvidia.com/gpu via extendedResourceName",
    "ours_extended": "schedpolicy-scheduler, nvidia.com/gpu via extendedResourceName",
}


B4_DRA_SHAPES = {
    "cpu_10m": "10m of CPU a pod, as in B4",
    "cpu_per_gpu": "10 cores of CPU per GPU",
}


def section_b4_dra(r: dict[str, Any]) -> list[str]:
    bound = r["ffd_bound"]
    shapes = r["shapes"]
    per_gpu = shapes.get("cpu_per_gpu") or next(iter(shapes.values()))
    img = bars(
        "b4-dra-packing",
        "B4-DRA: fully free 8-GPU nodes (10 cores per GPU)",
        ["default/claims", "ours/claims", "default/ext", "ours/ext", "FFD"][: len(per_gpu) + 1],
        [*(lane["free_nodes"] for lane in per_gpu.values()), bound["free_nodes"]],
        "nodes",
    )
    rows = [
        f"| {B4_DRA_SHAPES.get(shape, shape)} | {B4_DRA_LANES.get(k, k)} | {lane['free_nodes']}"
        f" | {lane['placeable_8gpu_pods']} | {lane['pending_pods']} | **{lane['ratio']}**"
        f" | {lane['seconds_to_place']} |"
        for shape, lanes in shapes.items()
        for k, lane in lanes.items()
    ]
    return [
        "## B4-DRA: GPU packing when the GPUs are DRA devices",
        f"B4's stream ({r['pods']} pods, 1/2/4/8 GPUs, seed {r['seed']}, {r['gpus_requested']}"
        f" GPUs) on {r['nodes']} nodes whose 8 GPUs only their ResourceSlices publish (no device"
        " plugin), through the real kube-scheduler, one lane after another on the same nodes,"
        " with two CPU requests per pod.",
        "",
        "| pods' CPU | lane | free nodes | 8-GPU pods still placeable | pending pods | of FFD"
        " | s to place |",
        "|---|---|---|---|---|---|---|",
        *rows,
        f"| | first-fit-decreasing (offline) | {bound['free_nodes']} |"
        f" {bound['placeable_8gpu_pods']} | {bound['pending_pods']} | 1.0 | |",
        "",
        "A claim that names a DeviceClass gets no utilization score from the upstream scheduler:"
        " the DynamicResources plugin scores only which prioritized-list alternative was chosen,"
        " and NodeResourcesFit does not see claims. Through a DeviceClass with"
        " extendedResourceName (the chart's `dra.extendedResource`), NodeResourcesFit counts the"
        " class's devices as the node's nvidia.com/gpu, and MostAllocated packs them as it packs"
        " a device plugin's GPUs. With 10m of CPU every node scores the same, and the scheduler"
        " breaks the tie the same way for each pod it does not batch (pods with claims, or with"
        " DRA-backed extended resources, are never batched): first fit in node order, which"
        " packs whatever the profile. With 10 cores a GPU the default profile spreads (0 free"
        " nodes on both routes). The chart's profile packs claims then only because its"
        " MostAllocated reads CPU, which here grows with the GPUs: for claims whose pods' CPU"
        " does not follow their GPUs, upstream has nothing to pack them by, and the"
        " extendedResourceName route is the one that packs GPUs as such. Goal: ≥ 0.95 of FFD"
        " for our profile.",
        "",
        f"![B4-DRA]({img})",
    ]


def ratio_over_time(name: str, run: dict[str, Any]) -> str:
    fig, axes = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for ax, size in zip(axes, ("8gpu", "4gpu"), strict=True):
        for short, lane in run["lanes"].items():
            points = lane["checkpoints"]
            ax.plot(
                [c["t"] for c in points],
                [
                    float("nan") if c[f"ratio_{size}"] is None else c[f"ratio_{size}"]
                    for c in points
                ],
                marker="o",
                linewidth=2.5 if short in ("ours", "default") else 1,
                label=short,
            )
        ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{size[0]}-GPU jobs still placeable, of an offline FFD repack")
        ax.set_ylabel("ratio")
        ax.set_ylim(-0.05, 1.3)
    axes[0].legend(fontsize=8, ncol=5, loc="upper center")
    axes[1].set_xlabel("seconds after warm-up")
    fig.suptitle(f"B4c: packing under churn (seed {run['seed']})")
    fig.tight_layout()
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"results/{path.name}"


def _against_default(r: dict[str, Any], short: str) -> str:
    pairs = [
        (a["ratio_8gpu"], b["ratio_8gpu"])
        for run in r["runs"]
        for a, b in zip(
            run["lanes"][short]["checkpoints"], run["lanes"]["default"]["checkpoints"], strict=False
        )
        if a["ratio_8gpu"] is not None and b["ratio_8gpu"] is not None
    ]
    above = sum(1 for a, b in pairs if a > b)
    below = sum(1 for a, b in pairs if a < b)
    return f"{above} above, {below} below, {len(pairs) - above - below} equal"


def _b4c_limits(r: dict[str, Any]) -> list[str]:
    points = [c for run in r["runs"] for c in run["lanes"]["ours"]["checkpoints"]]
    zero = [c for c in points if c["ratio_8gpu"] == 0]
    capacity = r["runs"][0]["lanes"]["ours"]["capacity_gpus"]

    def mean(key: str) -> float:
        return round(float(sum(c[key] for c in points)) / len(points), 2)

    free = round(sum(capacity * (1 - c["load"]) for c in points) / len(points), 1)
    default = r["lanes"]["default"]
    return [
        f"What limits it: at an average checkpoint the schedpolicy lane has {free} of its"
        f" {capacity} GPUs free. Left where they are, its running jobs leave room for"
        f" {mean('placeable_8gpu')} 8-GPU jobs; repacked, for {mean('ffd_placeable_8gpu')}. Of"
        f" the {len(zero)} checkpoints (of {len(points)}) where no 8-GPU job fits but a repack"
        f" would make room, {sum(1 for c in zero if not c['pending_jobs'])} have no pod"
        " waiting at all: the free GPUs lie in pieces smaller than a node. A scheduler places"
        " each job once, when it arrives, and jobs end at random times, so holes open on many"
        " nodes at once; the repack moves every running job, which only a defragmenting"
        " descheduler (or placement that knows when jobs end) could match. The default"
        f" profile spreads: it places {default['mean_load']} of the GPUs against"
        f" {r['lanes']['ours']['mean_load']} for the same requests, and keeps up to"
        f" {default['max_pending_jobs']} jobs waiting that a repack would place.",
    ]


def section_b4c(r: dict[str, Any]) -> list[str]:
    img = ratio_over_time("b4c-churn", r["runs"][0])
    lanes, nodes = r["lanes"], r["nodes_per_lane"]
    default = lanes["default"]
    rows = [
        f"| {lane['description']} | {lane['turnover']} | {lane['requested_load']['mean']}"
        f" | {lane['mean_load']} | **{lane['min_ratio_8gpu']}** | {lane['mean_ratio_8gpu']}"
        f" | **{lane['pooled_ratio_8gpu']}** | {lane['min_ratio_4gpu']} | {lane['pooled_ratio_4gpu']}"
        f" | {lane['max_pending_jobs']} / {lane['max_ffd_pending_jobs']}"
        f" | {'-' if short == 'default' else _against_default(r, short)} |"
        for short, lane in lanes.items()
    ]
    seeds = [
        f"| {run['seed']} | {run['job_sizes']} | {run['tick_seconds']['mean']} /"
        f" {run['tick_seconds']['max']} | "
        + " | ".join(str(lane["pooled_ratio_8gpu"]) for lane in run["lanes"].values())
        + " |"
        for run in r["runs"]
    ]
    ours = lanes["ours"]
    return [
        "## B4c: GPU packing under churn",
        f"Each profile gets its own lane of {nodes['8gpu']} 8-GPU and {nodes['4gpu']} 4-GPU nodes"
        f" and the same seeded stream of jobs (seeds {r['seeds']}; 1/2/4/8 GPUs, 4-12 CPUs per"
        f" GPU, lifetimes uniform around {r['mean_lifetime_seconds']} s; KWOK completes each pod"
        " when its lifetime is up). A lane's next job is created whenever its unfinished jobs"
        f" ask for at most {r['target_load']} of its GPUs. All lanes run at once on the real"
        f" kube-scheduler. After a {r['warmup_seconds']} s warm-up, every"
        f" {r['checkpoint_every_seconds']} s for {r['window_seconds']} s, each lane's free GPUs"
        " are compared with a first-fit-decreasing repack (smallest nodes first) of the jobs"
        " running at that moment, and its unschedulable pods with a repack of the running and"
        " the pending jobs together.",
        "",
        "| profile | turnover | load requested | load placed | 8-GPU ratio, min | mean |"
        " pooled | 4-GPU ratio, min | pooled | max pending / FFD's | 8-GPU ratio vs default,"
        " per checkpoint |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Pooled 8-GPU ratio by seed, with the jobs each seed started, by size:",
        "",
        "| seed | jobs by GPUs | driver tick, mean / max s | " + " | ".join(lanes) + " |",
        "|---|---|---|" + "---|" * len(lanes),
        *seeds,
        "",
        f"**schedpolicy-scheduler: minimum {ours['min_ratio_8gpu']}, mean"
        f" {ours['mean_ratio_8gpu']}; default profile: minimum {default['min_ratio_8gpu']}, mean"
        f" {default['mean_ratio_8gpu']}** (goal: minimum ≥ 0.9 and above the default profile at"
        " every checkpoint). A checkpoint where the repack itself has no room for an 8-GPU job"
        " has no ratio and is left out of the minimum.",
        "",
        *_b4c_limits(r),
        "",
        f"![B4c]({img})",
    ]


def _skew(zones: dict[str, Any]) -> str:
    # None means the scale-down emptied a zone: no finite max/min.
    ratio = zones["max_over_min"]
    return "∞ (a zone emptied)" if ratio is None else str(ratio)


def section_b5(r: dict[str, Any]) -> list[str]:
    n, z = r["nodes_emptied"], r["zones"]
    img = bars(
        "b5-scaledown",
        "B5: nodes emptied by a scale-down",
        ["no policy", "NodeConsolidation", "ideal"],
        [n["without_policy"], n["with_policy"], n["ideal"]],
        "nodes",
    )
    return [
        "## B5: scale-down",
        f"{r['replicas']} replicas spread evenly over {r['nodes']} nodes that also run other work, scaled to"
        f" {r['replicas'] // 2} by the real ReplicaSet controller.",
        "",
        "| | nodes left with no replica |",
        "|---|---|",
        f"| no policy | {n['without_policy']} |",
        f"| NodeConsolidation | {n['with_policy']} |",
        f"| ideal (offline greedy) | {n['ideal']} |",
        "",
        f"**{r['ratio']} of ideal** (goal ≥ 0.9).",
        "",
        "Zones: 60 replicas at 30/20/10 over three zones, scaled to 30.",
        "",
        "| | replicas per zone | max/min |",
        "|---|---|---|",
        f"| no policy | {z['without_policy']['per_zone']} | {_skew(z['without_policy'])} |",
        f"| ZoneBalance | {z['with_policy']['per_zone']} | {_skew(z['with_policy'])} |",
        "",
        f"![B5]({img})",
    ]


def section_b5g(r: dict[str, Any]) -> list[str]:
    f, ratio = r["freed"], r["ratio"]
    img = bars(
        "b5g-gpu-scaledown",
        "B5g: GPU nodes freed by a scale-down",
        ["no policy", "CPU fill", "GPU fill", "ideal"],
        [f["no_policy"], f["cpu_fill"], f["gpu_fill"], f["ideal"]],
        "nodes with no GPU in use",
    )
    busy = sum(1 for n in r["layout"] if n["other_gpus"])
    heavy = sum(1 for n in r["layout"] if n["other_cpu"] > 2)
    met = (
        ratio["gpu_fill"] is not None and ratio["gpu_fill"] >= 0.9 and f["gpu_fill"] > f["cpu_fill"]
    )
    return [
        "## B5g: GPU scale-down",
        f"{r['nodes']} nodes of {r['gpus_per_node']} GPUs; {busy} run other GPU jobs that need little"
        f" CPU, {heavy} run CPU-heavy work with no GPU. An inference Deployment of"
        f" {r['replicas'][0]} one-GPU replicas (4 CPUs each; per-node pod capacity pins the same"
        f" placement in every case) is scaled to {r['replicas'][1]} by the real ReplicaSet"
        " controller.",
        "",
        "| | GPU nodes left with no GPU in use | of ideal |",
        "|---|---|---|",
        f"| no policy | {f['no_policy']} | {ratio['no_policy']} |",
        f"| NodeConsolidation, `resources: [cpu]` (the default) | {f['cpu_fill']} | {ratio['cpu_fill']} |",
        f"| NodeConsolidation, `resources: [nvidia.com/gpu]` | {f['gpu_fill']} | {ratio['gpu_fill']} |",
        f"| ideal (offline greedy over the nodes with no other GPU job) | {f['ideal']} | 1.0 |",
        "",
        f"**GPU fill {ratio['gpu_fill']} of ideal, {f['gpu_fill']} nodes against CPU fill's"
        f" {f['cpu_fill']}** (goal ≥ 0.9 of ideal and strictly more than CPU fill:"
        f" {'met' if met else 'not met'}).",
        "",
        "What limits GPU fill: replicas on nodes of equal fill get equal costs, and for the"
        " deletions that fall inside such a tie the ReplicaSet controller's next criteria"
        " (replicas doubled up on a node, then age) do not group its choice by node, so it can"
        " split them between two nodes and free neither. The offline ideal empties one node"
        " of the tie.",
        "",
        f"![B5g]({img})",
    ]


def _of(lanes: dict[str, Any], key: str) -> str:
    """The product lane's figure as a share of Karpenter-alone's."""
    alone, product = lanes["karpenter-alone"][key], lanes["product"][key]
    return f"{product / alone:.2f} of alone" if alone else "n/a"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


SECTIONS = {
    "b1-convergence": section_b1,
    "b2-memory": section_b2,
    "b3-webhook": section_b3,
    "b4-packing": section_b4,
    "b4-dra-packing": section_b4_dra,
    "b4c-churn": section_b4c,
    "b5-scaledown": section_b5,
    "b5g-gpu-scaledown": section_b5g,
    "b6-gpu-hours": section_b6,
    "b7-serving": section_b7,
}


def write() -> str:
    results = load()
    scales = sorted({str(r.get("scale")) for k, r in results.items() if k in SECTIONS})
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `make bench` (scale: {', '.join(scales)}; each section names its own) from"
        " `bench/results/*.json`. Every figure is",
        "measured against a baseline in the same run on the same local control plane (real",
        "etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK), because absolute",
        "numbers on a shared 2-core machine are noise.",
        "",
    ]
    for key in ORDER:
        if key in results:
            if "error" in results[key]:
                lines += [
                    f"## {results[key]['name']}",
                    "",
                    f"Failed: `{results[key]['error']}`",
                    "",
                ]
            else:
                title, *body = SECTIONS[key](results[key])
                lines += [f"{title} (scale: {results[key].get('scale')})", *body, ""]
    REPORT.write_text("\n".join(lines))
    return str(REPORT)


if __name__ == "__main__":
    print(write())
