"""B8's section of bench/REPORT.md."""

from __future__ import annotations

from typing import Any

from bench.charts import header, row


def _fit(steps: list[dict[str, Any]], key: str) -> tuple[float, float]:
    """Least squares of a process's MiB on pods: (MiB at 0 pods, KiB per pod)."""
    xs = [s["pods"] for s in steps]
    ys = [key_of(s, key) for s in steps]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / max(
        sum((x - mx) ** 2 for x in xs), 1e-9
    )
    return round(my - slope * mx, 1), round(slope * 1024, 2)


def key_of(step: dict[str, Any], key: str) -> float:
    if key == "controller":
        return float(step["controller"]["peak_mib"])
    if key == "webhook":
        return float(step["webhook"]["peak_mib"])
    return float(step["control_plane"][key]["peak_mib"])


def section_b8(r: dict[str, Any]) -> list[str]:
    steps, churn = r["steps"], r["churn"]
    last = steps[-1]
    plane = last["control_plane"]
    lines = [
        "## B8: the envelope",
        f"The fleet grown in {len(steps)} steps to {last['pods']} pods in ReplicaSets on"
        f" {last['nodes']} KWOK nodes (a tenth of them 8-GPU nodes; three zones; a third spot),"
        " created bound by the bench's own client. Changed for the size: "
        + "; ".join(r["control_plane_changes"])
        + ". At each step a fresh controller (the chart's write concurrency) converges the"
        " step's new pods and is restarted over the converged fleet; every figure is from"
        " /proc and the controller's metrics.",
        "",
        *(
            [f"**The machine stopped the fleet short of the envelope:** {r['stopped']}.", ""]
            if r.get("stopped")
            else []
        ),
        *header(
            "pods",
            "nodes",
            "created pods/s",
            "controller peak MiB",
            "settled MiB",
            "restart peak MiB",
            "webhook MiB",
            "chart scheduler MiB",
            "apiserver MiB",
            "etcd MiB",
        ),
    ]
    for s in steps:
        cp = s["control_plane"]
        lines.append(
            row(
                s["pods"],
                s["nodes"],
                s["created"]["pods_per_second"],
                s["controller"]["peak_mib"],
                s["controller"]["rss_mib"],
                s["restart"]["peak_mib"],
                s["webhook"]["peak_mib"],
                cp.get("schedpolicy-scheduler", {}).get("peak_mib"),
                cp.get("kube-apiserver", {}).get("peak_mib"),
                cp.get("etcd", {}).get("peak_mib"),
            )
        )
    lines += [
        "",
        *header(
            "pods",
            "new pods",
            "s to sync",
            "s to converge",
            "writes/s",
            "restart: s to sync",
            "restart: writes",
            "CPU s per 1,000 pod events",
            "wrong after",
        ),
    ]
    for s in steps:
        lines.append(
            row(
                s["pods"],
                s["to_write"],
                s["seconds_to_sync"],
                s["seconds_to_converge"],
                s["writes_per_second"],
                s["restart"]["seconds_to_sync"],
                s["restart"]["writes"],
                s["cpu_seconds_per_1000_pod_events"],
                s["wrong_after"],
            )
        )
    base, per_pod = _fit(steps, "controller")
    lines += [
        "",
        f"Controller peak, fitted over the steps: {base} MiB + {per_pod} KiB a pod"
        f" ({round(base + per_pod * 150_000 / 1024)} MiB at 150k pods). KWOK at the last step:"
        f" {plane.get('kwok', {}).get('peak_mib')} MiB; kube-controller-manager"
        f" {plane.get('kube-controller-manager', {}).get('peak_mib')} MiB.",
        "",
    ]
    # One phase before churn came in phases (B8 of 2026-12-07).
    for phase in churn.get("phases") or [churn]:
        lines += _phase(phase, last)
    lines += [
        f"Pods whose stored cost differs from a fresh recompute after the churn:"
        f" **{churn['wrong_after']}** of {churn['pods_after']}. Controller after the churn:"
        f" {churn['controller']['rss_mib']} MiB (peak {churn['controller']['peak_mib']}).",
    ]
    return lines


def _lag_row(what: str, lag: dict[str, Any]) -> str:
    return row(what, lag["count"], lag["p50"], lag["p99"], lag["max"])


def _phase(p: dict[str, Any], last: dict[str, Any]) -> list[str]:
    a, w = p["audit"], p["watch"]
    per = p["controller_writes"] / max(p["replaced"], 1)
    bound = last["writes_per_second"] / per if per else 0
    drain = (
        f" The controller's queue was empty again {p['drain_seconds']} s after the churn stopped"
        " (10 s of it empty included)."
        if "drain_seconds" in p
        else ""
    )
    return [
        f"**Churn** at {last['pods']} pods: {p['target_per_second']} replacements a second"
        f" asked (a delete and a bound create each), {p['achieved_per_second']} achieved over"
        f" {p['seconds']} s ({p['replaced']} replaced; the driver's requests refused:"
        f" {p['driver_refused'] or 'none'}).{drain}",
        "",
        *header("lag to the right cost (s)", "count", "p50", "p99", "max"),
        _lag_row("new pods, audit log", a["lag"]),
        _lag_row("new pods, watch", w["lag_new_pods"]),
        _lag_row(
            "their node's and ReplicaSet's other pods, watch (a lower bound)", w["lag_rippled_pods"]
        ),
        "",
        f"Each replacement cost the controller **{per:.1f} writes** (the new pod's, and the"
        " re-costs of its node's and its ReplicaSet's other pods). At the"
        f" {last['writes_per_second']} writes a second the controller sustained while it"
        " converged this fleet, that bounds the replacements it can keep right at about"
        f" **{bound:.0f} a second** here. New pods go ahead of re-costs in its queue"
        " (shell/write_queue.py), and their own bound is the write rate itself.",
        "",
        f"Write queue depth: max {p['queue_depth']['max']}, p99 {p['queue_depth']['p99']},"
        f" mean {p['queue_depth']['mean']}. Controller writes refused, by HTTP status:"
        f" {a['controller_writes_refused'] or 'none'} (429 and 5xx are retried after a timer;"
        " 409 and 422 mean the pod moved under the write, which is planned again from the"
        f" watch). New pods never costed: audit {a['never_patched']},"
        f" watch {w['new_pods_never_costed']}."
        + (f" The watch was resumed {w['reconnects']} times." if w.get("reconnects") else "")
        + (f" **{w['gone']}**: its figures stop there." if w.get("gone") else ""),
        "",
    ]
