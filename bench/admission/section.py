"""B3's section of bench/REPORT.md."""

from __future__ import annotations

from typing import Any

from bench.charts import bars, header, row

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
    lines = _intro(r)
    null = r.get("null_webhook")
    if r.get("lanes"):
        lines += ["", *b3_lanes(r)]
    elif null:
        lines += _bare_webhook(null)
    lines += [
        *_machine(r),
        "",
        f"**Webhook p99 {r.get('own_p99_ms')} ms** by its own histogram (acceptance ≤ 10, goal ≤ 3);"
        f" **added create p99 {r['added_p99_ms']} ms** (acceptance ≤ 20, goal ≤ 10).",
        "",
        *_burst(r),
        *_policy_cost(r.get("policy_cost")),
        *_memory(r.get("webhook_memory")),
    ]
    return [
        *lines,
        "A separate, profiled pass of the same load: [profiles/b3-webhook.txt](profiles/b3-webhook.txt).",
        "",
        f"![B3]({img})",
    ]


def _policy_cost(cost: dict[str, Any] | None) -> list[str]:
    """What each admission policy costs the apiserver per create, by its own histogram."""
    if not cost:
        return []
    ms = cost["per_create_ms"]
    lines = [
        f"**Compiled policy per create: {ms['compiled']} ms, {cost['compiled_over_floor']} x the"
        f" floor policy's {ms['floor']} ms** (acceptance ≤ 1.3 x), by the apiserver's"
        " `apiserver_mutating_admission_policy_check_duration_seconds` over"
        f" {cost['creates_per_round']} sequential dry-run creates a round, median of"
        f" {len(cost['per_create_ms_by_round']['floor'])} rounds taken in turn. The same bench"
        f" policy as the compiler made it before the one-op-per-field cuts: {ms['before']} ms"
        f" ({cost['before_over_floor']} x the floor). By round: {cost['per_create_ms_by_round']}.",
        "",
    ]
    if "output" in ms:
        lines += [
            f"The compiled policy's output for the bench pod written as constants, with no"
            f" condition: {ms['output']} ms, {cost['output_over_floor']} x the floor; the"
            f" compiled policy is {cost['compiled_over_output']} x that.",
            "",
        ]
    if cost.get("in_process"):
        inp = cost["in_process"]
        lines += [
            "In process (`map_cost/`, the apiserver's own patcher): µs per create"
            f" {inp['us_per_create']}, allocations {inp['allocs_per_create']}; over the floor"
            f" {inp['over_floor']} (time), {inp['allocs_over_floor']} (allocations).",
            "",
        ]
    return lines


def _memory(memory: dict[str, Any] | None) -> list[str]:
    """The webhook's resident set idle and after each burst."""
    if not memory:
        return []
    after = [k for k in memory if k.startswith("after_")]
    said = "; ".join(
        f"after {k.removeprefix('after_')} pods {memory[k]['VmRSS']} MiB (peak {memory[k]['VmHWM']})"
        for k in after
    )
    return [
        f"**Webhook memory under bursts:** idle {memory['idle']['VmRSS']} MiB; {said}:"
        f" {memory['grew_mib']} MiB over idle at the peak (acceptance ≤ 20).",
        "",
    ]


def section_b3_cost(r: dict[str, Any]) -> list[str]:
    """B3's policy cost run alone."""
    return ["## B3p: what each admission policy costs per create", *_policy_cost(r["policy_cost"])]


def section_b3_memory(r: dict[str, Any]) -> list[str]:
    """B3's memory lane run alone: the resident set, then what the traced run counted."""
    heap = r["heap"]
    rows = [
        row(
            stage.replace("_", " "),
            f["VmRSS"],
            f["traced_mib"],
            f["malloc_in_use_mib"],
            f["malloc_free_kept_mib"],
        )
        for stage, f in heap.items()
    ]
    return [
        "## B3m: the webhook's memory under bursts",
        *_memory(r["webhook_memory"]),
        "The same bursts against a webhook under tracemalloc (its own RSS is higher: tracing"
        " costs memory). What each part of the process held:",
        "",
        *header(
            "", "RSS (MiB)", "Python heap (MiB)", "malloc in use (MiB)", "malloc free, kept (MiB)"
        ),
        *rows,
        "",
        "Where the heap grew: [profiles/b3-webhook-heap.txt](profiles/b3-webhook-heap.txt).",
        *_before(r.get("before")),
    ]


def _before(before: dict[str, Any] | None) -> list[str]:
    """An earlier run kept beside this one: what the lane measured before a change."""
    if not before:
        return []
    memory = before["webhook_memory"]
    return [
        "",
        f"Before, {before['what']}: idle {memory['idle']['VmRSS']} MiB,"
        f" {memory['grew_mib']} MiB over idle at the peak"
        " ([profiles/b3-webhook-heap-before.txt](profiles/b3-webhook-heap-before.txt)).",
    ]


def _intro(r: dict[str, Any]) -> list[str]:
    load = (
        "while the controller converges B1's fleet in the same cluster"
        if r.get("under_load")
        else "with no other load (B1's fleet absent)"
    )
    return [
        "## B3: webhook latency",
        f"{r['creates']} pod creates at {r['rate_per_second']}/s {load}"
        f" ({r['pods_hinted']} pods hinted). Creates are timed one by one from the apiserver's audit"
        " log; webhook calls by the apiserver's coarse buckets (5, 25, 50, 100 ms …), interpolated",
        "within a bucket; the webhook's own histogram has buckets from 0.5 ms.",
        "",
        *header("", "p50 (ms)", "p99 (ms)"),
        row("create, no webhook", r["create_p50_ms_without"], r["create_p99_ms_without"]),
        row("create, with webhook", r["create_p50_ms_with"], r["create_p99_ms_with"]),
        row("webhook admission (apiserver's histogram)", r["webhook_p50_ms"], r["webhook_p99_ms"]),
        row("webhook (its own histogram)", r.get("own_p50_ms"), r.get("own_p99_ms")),
    ]


def _bare_webhook(null: dict[str, Any]) -> list[str]:
    """Results from before the lanes: the bare webhook's rows and what they say."""
    return [
        row(
            "bare webhook admission (apiserver's histogram)",
            null["webhook_p50_ms"],
            null["webhook_p99_ms"],
        ),
        row("create, with the bare webhook", "", null["create_p99_ms_with"]),
        "",
        "The bare webhook (bench/admission/null_webhook.py) is the same aiohttp server, TLS and msgspec"
        " decoding with no view, answering `allowed` with no patch: under the same load it adds"
        f" {null['added_p99_ms']} ms to the create p99. The difference between its row and ours"
        " is our code's; the rest is what this machine's apiserver and CPU allow any webhook.",
    ]


def _machine(r: dict[str, Any]) -> list[str]:
    """How busy both CPUs were, and how each webhook ran and waited per call."""
    lines = []
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
    return lines


def _burst(r: dict[str, Any]) -> list[str]:
    burst = r.get("burst") or {}
    if not burst:
        return []
    shares = " · ".join(f"≤ {k}: {v:.1%}" for k, v in burst["bucket_shares"].items())
    lines = [
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
            "The same burst against a bare webhook (bench/admission/null_webhook.py: the same aiohttp"
            " server, TLS and msgspec decoding, no view, answers `allowed` with no patch):"
            f" **{null['share_under_25ms']:.1%} under 25 ms**, {null['pods_created']} pods"
            f" in {null['seconds_to_create']} s. That is what this machine lets any webhook"
            " of ours reach; the gap between the two rows is our code's.",
            "",
        ]
    return lines
