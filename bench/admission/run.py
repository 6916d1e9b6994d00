"""B3's run: every admission path's lane (paths.py) on the shared cluster, the profiled
pass, then the acceptance's lanes taken in turn (in_turn.py); and its result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import fleet
from bench.admission.in_turn import gain_in_turn, in_turn, pooled, spreads
from bench.admission.load import NAMESPACE, RATE, bench_policy
from bench.admission.memory import heap_profile, webhook_memory
from bench.admission.paths import Paths
from bench.admission.policy_cost import run_policy_costs
from bench.convergence import costs
from bench.lanes import Figures, compare, medians, rounded, run_in_turn, summarise
from bench.scale import Scale
from localcluster import LocalCluster
from schedpolicy.core.placement.api import Placement

FIGURES = ("create_p50_ms", "create_p99_ms", "burst_create_share_under_25ms")


def run_b3(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    fleet.namespace(cluster, NAMESPACE)
    cluster.kubectl("apply", "-f", "-", objects=[bench_policy()])
    under_load = bool(fleet.replicas(cluster, costs.NAMESPACE))
    paths = Paths(cluster, scale, out)
    scheduler = Placement.model_validate(bench_policy()["spec"]["placement"]).scheduler_name
    try:
        runs = run_in_turn(paths.lanes(), scale.repeats, cluster)
        paths.profiled()
        turns = in_turn(cluster, scale, paths, scheduler)
        cost = run_policy_costs(cluster, paths.compiled, scheduler)
        memory = webhook_memory(cluster, scale, paths)
    finally:
        paths.stop()
    cluster.kubectl("delete", "spol", "bench-webhook")
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
    summary = summarize(scale, runs, under_load)
    summary["in_turn"] = {name: pooled(rounds) for name, rounds in turns.items()}
    summary["compiled_gain"].update(gain_in_turn(summary["in_turn"]))
    summary.update(spreads(turns))
    summary["policy_cost"] = cost
    summary["webhook_memory"] = memory
    return summary


def run_b3_cost(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    """B3's policy cost alone (`--only B3P`): the bench policy compiled by a policy-mode
    controller, then each policy's cost per create (policy_cost.py)."""
    fleet.namespace(cluster, NAMESPACE)
    cluster.kubectl("apply", "-f", "-", objects=[bench_policy()])
    paths = Paths(cluster, scale, out)
    scheduler = Placement.model_validate(bench_policy()["spec"]["placement"]).scheduler_name
    try:
        paths.compile()
        paths.keep_compiled()
        cost = run_policy_costs(cluster, paths.compiled, scheduler)
    finally:
        paths.stop()
    cluster.kubectl("delete", "spol", "bench-webhook")
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
    return {"name": "B3p admission policy cost", "scale": scale.name, "policy_cost": cost}


def run_b3_memory(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    """B3's memory lane alone (`--only B3M`): the untraced webhook's resident set under the
    bursts, then the same bursts under tracemalloc, its heap's growth in profiles/."""
    fleet.namespace(cluster, NAMESPACE)
    cluster.kubectl("apply", "-f", "-", objects=[bench_policy()])
    paths = Paths(cluster, scale, out)
    try:
        memory = webhook_memory(cluster, scale, paths)
        heap = heap_profile(cluster, scale, paths, out.parent / "profiles" / "b3-webhook-heap.txt")
    finally:
        paths.stop()
    cluster.kubectl("delete", "spol", "bench-webhook")
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
    return {
        "name": "B3m webhook memory under bursts",
        "scale": scale.name,
        "webhook_memory": memory,
        "heap": heap,
    }


def _lane_summary(lane: Figures, base_p99: float) -> dict[str, Any]:
    q = lane["quantiles"]
    return {
        "create_p50_ms": round(q["create"][0.5], 2),
        "create_p99_ms": round(q["create"][0.99], 2),
        "added_p99_ms": round(q["create"][0.99] - base_p99, 2),
        "added_p99_ratio": round(q["create"][0.99] / base_p99 - 1, 4) if base_p99 else None,
        "webhook_p50_ms": round(q["hook"][0.5], 2),
        "webhook_p99_ms": round(q["hook"][0.99], 2),
        "pods_hinted_under_load": lane["hinted_under_load"],
        "burst": lane["burst"],
    }


def _flat(run: Figures) -> Figures:
    """A run's figures that its lane's spread keeps."""
    create = run["quantiles"]["create"]
    return {
        "create_p50_ms": create[0.5],
        "create_p99_ms": create[0.99],
        "burst_create_share_under_25ms": run["burst"]["create_share_under_25ms"],
    }


def _spread(runs: dict[str, list[Figures]]) -> dict[str, Any]:
    """Each path's runs as min, median and max; each against no admission."""
    summary = summarise({name: [_flat(r) for r in rs] for name, rs in runs.items()}, FIGURES)
    return {
        "spread": rounded(summary, 4),
        "compared": {
            f"{name}_vs_none": compare(lane, summary["none"], FIGURES)
            for name, lane in summary.items()
            if name != "none"
        },
    }


def summarize(scale: Scale, runs: dict[str, list[Figures]], under_load: bool) -> dict[str, Any]:
    """B3's result: each path's median run (a lane ran `repeats` times), and the webhook
    lane's figures under the names the report has always read."""
    results = {name: medians(lane) for name, lane in runs.items()}
    base = results["none"]["quantiles"]["create"]
    ours = results["webhook"]
    q = ours["quantiles"]
    summary = {name: _lane_summary(lane, base[0.99]) for name, lane in results.items()}
    compiled, none = summary["compiled"], summary["none"]
    return {
        "name": "B3 webhook latency",
        "scale": scale.name,
        "creates": scale.webhook_seconds * RATE,
        "rate_per_second": RATE,
        "under_load": under_load,
        "machine_busy_share": {_tag(name): lane["busy_share"] for name, lane in results.items()},
        "webhook_scheduling": {
            _tag(name): lane["scheduling"] for name, lane in results.items() if lane["scheduling"]
        },
        "lanes": summary,
        "compiled_gain": {
            "added_p99_ratio": compiled["added_p99_ratio"],
            "burst_create_share_under_25ms": compiled["burst"]["create_share_under_25ms"],
            "no_admission_burst_create_share_under_25ms": none["burst"]["create_share_under_25ms"],
            "burst_pods_without_hints": compiled["burst"]["pods_without_hints"],
            "goal": "added create p99 <= 5% over no admission; burst: 0 pods without hints,"
            " share of creates under 25 ms >= the no-admission lane's - 5 points",
        },
        # The webhook lane under its old names, for the report's history.
        "pods_hinted": ours["hinted_under_load"],
        "null_webhook": summary["python_null"],
        "webhook_p50_ms": round(q["hook"][0.5], 2),
        "webhook_p99_ms": round(q["hook"][0.99], 2),
        "own_p50_ms": round(q["own"][0.5], 3),
        "own_p99_ms": round(q["own"][0.99], 3),
        "burst": ours["burst"],
        "create_p50_ms_without": round(base[0.5], 2),
        "create_p99_ms_without": round(base[0.99], 2),
        "create_p50_ms_with": round(q["create"][0.5], 2),
        "create_p99_ms_with": round(q["create"][0.99], 2),
        "added_p99_ms": round(q["create"][0.99] - base[0.99], 2),
        "goal": "own p99 <= 10 ms under load, added create p99 <= 20 ms; burst >= 90%"
        " under 25 ms, 0 fail-opens, 0 pods without hints",
        "repeats": scale.repeats,
        **_spread(runs),
    }


def _tag(name: str) -> str:
    """The lane's name as its pods and the older results spell it."""
    return name.replace("_", "-")
