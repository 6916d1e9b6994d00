"""B3's acceptance lanes taken in turn (bench.lanes.run_in_turn), a load and a burst each a
round, in an order that rotates by one every round, each lane's admission alone in force
(the webhook lanes register the chart's configuration for their round only): so that the
acceptance rests on more than one sample of each. The same lane's
burst share under 25 ms moves by 10-25 points from one burst to the next here, and its
load p99 by a factor of two. Creates are timed one by one from the audit log.

"scheduler": no admission, the pods naming our scheduler themselves. Against "none" it is
what our scheduler profile costs the machine; against "floor", what the admission policy
machinery costs.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass
from typing import Any

from bench import fleet
from bench.admission.create_latency import AuditCursor, quantile
from bench.admission.floor import BENCH_LABEL, floor_policy
from bench.admission.load import NAMESPACE, clear_load, create_load, run_burst
from bench.admission.paths import MANAGED, POLICY_KINDS, Paths, point_at
from bench.lanes import Figures, Lane, compare, rounded, run_in_turn, summarise
from bench.scale import Scale
from localcluster import LocalCluster

IN_TURN = ("none", "scheduler", "floor", "compiled", "webhook", "python_null", "go_null")
WEBHOOKS = ("webhook", "python_null", "go_null")
HINTED = ("compiled", "webhook")
ROUNDS = 5  # times the scale's repeats
FIGURES = ("load_p99_ms", "create_share_under_25ms")


def serving(cluster: LocalCluster, *, hinted: bool, scheduler: str | None) -> None:
    """Until the apiserver admits a pod as the lane means it to: it loads admission policies
    from its own watch, some time after they are written or deleted."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": NAMESPACE, "labels": {"app": "load"}},
        "spec": {"containers": [{"name": "c", "image": fleet.PAUSE}]},
    }

    def admitted() -> bool:
        out = json.loads(
            cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", objects=[probe])
        )
        annotations = out["metadata"].get("annotations") or {}
        return (
            out["spec"]["schedulerName"] == (scheduler or "default-scheduler")
            and ("schedpolicy.io/hints" in annotations) == hinted
        )

    fleet.wait_for(admitted, "the lane's admission in force", within=60, every=0.5)
    time.sleep(2)  # every apiserver watch has it, not just the one that answered


@dataclass(frozen=True)
class InTurn:
    """The lanes' admission objects (none, the floor policy, the compiled policy), the
    webhooks (through `paths`), and the scheduler those set."""

    scale: Scale
    objects: dict[str, list[dict[str, Any]]]
    scheduler: str
    paths: Paths

    def lane(self, name: str) -> Lane:
        return Lane(name, lambda cluster, repeat: self.run(name, cluster, repeat))

    def run(self, name: str, cluster: LocalCluster, repeat: int) -> Figures:
        """One round of lane `name`: its admission alone in force, a load, then a burst."""
        cluster.kubectl("delete", POLICY_KINDS, "-l", MANAGED, "--ignore-not-found")
        cluster.kubectl("delete", POLICY_KINDS, "-l", BENCH_LABEL, "--ignore-not-found")
        if self.objects.get(name):
            cluster.kubectl("apply", "-f", "-", objects=self.objects[name])
        null = None
        if name == "webhook":
            self.paths.serving()
            point_at(self.paths.webhook)
        elif name in WEBHOOKS:
            null = self.paths.start_null(name)
        try:
            sets = name in ("floor", "compiled", "webhook")
            serving(cluster, hinted=name in HINTED, scheduler=self.scheduler if sets else None)
            return self.measure(name, cluster, repeat)
        finally:
            if null is not None:
                null.terminate()
                null.wait()
            if name in WEBHOOKS:
                self.paths.webhook.unregister()

    def measure(self, name: str, cluster: LocalCluster, repeat: int) -> Figures:
        cursor = AuditCursor.now(cluster.audit_log)
        named = self.scheduler if name == "scheduler" else None
        # The tag names Deployments: a DNS label, so python_null becomes python-null.
        tag = f"turn{repeat}-{name.replace('_', '-')}"
        asyncio.run(create_load(cluster, self.scale.webhook_seconds, tag, named))
        time.sleep(1)  # the last creates' audit events
        load = cursor.creates(NAMESPACE)
        clear_load(cluster)
        cursor = AuditCursor.now(cluster.audit_log)
        burst = run_burst(cluster, self.scale, tag, named)
        return {
            "load": load,
            "load_p99_ms": round(quantile(load, 0.99), 2),
            "burst": cursor.creates(NAMESPACE),
            "create_share_under_25ms": burst["create_share_under_25ms"],
            "pods_without_hints": burst["pods_without_hints"] if name in HINTED else 0,
        }


def in_turn(
    cluster: LocalCluster, scale: Scale, paths: Paths, scheduler: str
) -> dict[str, list[Figures]]:
    """ROUNDS rounds (times the scale's repeats) of every lane; each lane's rounds."""
    objects: dict[str, list[dict[str, Any]]] = {
        "none": [],
        "scheduler": [],
        "floor": floor_policy(scheduler),
        "compiled": paths.compiled,
    }
    turns = InTurn(scale, objects, scheduler, paths)
    runs = run_in_turn([turns.lane(name) for name in IN_TURN], ROUNDS * scale.repeats, cluster)
    cluster.kubectl("delete", POLICY_KINDS, "-l", BENCH_LABEL, "--ignore-not-found")
    return runs


def pooled(rounds: list[Figures]) -> dict[str, Any]:
    """A lane's creates pooled over its rounds, with each round's p99 and burst share."""
    load = [ms for r in rounds for ms in r["load"]]
    burst = [ms for r in rounds for ms in r["burst"]]
    shares = [r["create_share_under_25ms"] for r in rounds]
    return {
        "load_creates": len(load),
        "load_p50_ms": round(quantile(load, 0.5), 2),
        "load_p99_ms": round(quantile(load, 0.99), 2),
        "load_p99_ms_by_round": [r["load_p99_ms"] for r in rounds],
        "burst_creates": len(burst),
        "burst_p50_ms": round(quantile(burst, 0.5), 2),
        "create_share_under_25ms": shares,
        # Every burst creates the same number of pods, so the mean is the pooled share.
        "mean_create_share_under_25ms": round(statistics.fmean(shares), 4),
        "pods_without_hints": [r["pods_without_hints"] for r in rounds],
    }


def spreads(runs: dict[str, list[Figures]]) -> dict[str, Any]:
    """Each lane's rounds as min, median and max, and the compiled lane's and the floor's
    against no admission."""
    summary = summarise(runs, FIGURES)
    return {
        "in_turn_spread": rounded(summary, 4),
        "in_turn_compared": {
            f"{name}_vs_none": compare(summary[name], summary["none"], FIGURES)
            for name in IN_TURN
            if name != "none"
        }
        | {
            "compiled_vs_floor": compare(summary["compiled"], summary["floor"], FIGURES),
        },
    }


def gain_in_turn(turns: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The acceptance's figures from the lanes taken in turn: the compiled lane against no
    admission, and the floor policy's against it too, for what any policy costs here."""
    none, floor, compiled = turns["none"], turns["floor"], turns["compiled"]
    ours = turns["scheduler"]

    def ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
        return round(float(a["load_p99_ms"]) / float(b["load_p99_ms"]) - 1, 4)

    return {
        "in_turn_added_p99_ratio": ratio(compiled, none),
        "in_turn_floor_added_p99_ratio": ratio(floor, none),
        "in_turn_compiled_over_floor_p99_ratio": ratio(compiled, floor),
        "in_turn_scheduler_p99_ratio": ratio(ours, none),
        "in_turn_compiled_over_scheduler_p99_ratio": ratio(compiled, ours),
        "in_turn_mean_share_under_25ms": {
            name: lane["mean_create_share_under_25ms"] for name, lane in turns.items()
        },
        "in_turn_pods_without_hints": sum(compiled["pods_without_hints"]),
    }
