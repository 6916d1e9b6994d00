"""What a mutating admission policy costs the apiserver per create, by the apiserver's own
histogram (`apiserver_mutating_admission_policy_check_duration_seconds`, per policy): the
floor policy (it only sets the scheduler), the bench policy as the compiler made it before
the cuts of issue 49 (bench/profiles/b3-compiled-before.json), and as it makes it now. Each
is alone in force over the same sequential dry-run creates, and the three take turns, so
that drift in the machine falls on all of them alike."""

from __future__ import annotations

import json
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import fleet
from bench.admission.floor import FLOOR, floor_policy
from bench.admission.in_turn import serving
from bench.admission.load import NAMESPACE
from bench.admission.metrics import apiserver_metrics
from bench.admission.paths import MANAGED, POLICY_KINDS
from bench.lanes import order
from localcluster import LocalCluster

CREATES = 400
ROUNDS = 3
METRIC = "apiserver_mutating_admission_policy_check_duration_seconds"
BEFORE = Path(__file__).parent.parent / "profiles" / "b3-compiled-before.json"


def before_objects() -> list[dict[str, Any]]:
    return list(json.loads(BEFORE.read_text())["objects"])


def _totals(text: str, policy: str) -> tuple[float, float]:
    """(seconds, checks) so far for one policy, summed over its bindings and error types."""
    seconds = checks = 0.0
    for line in text.splitlines():
        if not line.startswith(METRIC) or f'policy="{policy}"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith(f"{METRIC}_sum"):
            seconds += value
        elif line.startswith(f"{METRIC}_count"):
            checks += value
    return seconds, checks


def dry_run_creates(cluster: LocalCluster, count: int) -> None:
    """`count` pod creates, one after another, that the apiserver admits and stores not."""
    url = f"{cluster.server}/api/v1/namespaces/{NAMESPACE}/pods?dryRun=All"
    body = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "cost-", "labels": {"app": "load"}},
            "spec": {"containers": [{"name": "c", "image": fleet.PAUSE}]},
        }
    ).encode()
    context = cluster.ssl_context()
    for _ in range(count):
        request = urllib.request.Request(
            url, body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, context=context, timeout=30):
            pass


def per_create_ms(
    cluster: LocalCluster, objects: list[dict[str, Any]], scheduler: str, *, hinted: bool
) -> float:
    """The mean check time of the one policy in `objects`, over CREATES dry-run creates."""
    cluster.kubectl("delete", POLICY_KINDS, "-l", MANAGED, "--ignore-not-found")
    cluster.kubectl("delete", POLICY_KINDS, FLOOR, "--ignore-not-found")
    cluster.kubectl("apply", "-f", "-", objects=objects)
    serving(cluster, hinted=hinted, scheduler=scheduler)
    policy = objects[0]["metadata"]["name"]
    before = _totals(apiserver_metrics(cluster), policy)
    dry_run_creates(cluster, CREATES)
    time.sleep(1)
    after = _totals(apiserver_metrics(cluster), policy)
    checks = after[1] - before[1]
    if checks < CREATES:
        raise RuntimeError(f"{policy}: {checks:g} checks for {CREATES} creates")
    return (after[0] - before[0]) / checks * 1000


def run_policy_costs(
    cluster: LocalCluster, compiled: list[dict[str, Any]], scheduler: str
) -> dict[str, Any]:
    """Each policy's check time per create, round by round, and the ratios to the floor."""
    variants = {
        "floor": (floor_policy(scheduler), False),
        "before": (before_objects(), True),
        "compiled": (compiled, True),
    }
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(ROUNDS):
        for name in order(list(variants), r):
            objects, hinted = variants[name]
            rounds[name].append(round(per_create_ms(cluster, objects, scheduler, hinted=hinted), 4))
    cluster.kubectl("delete", POLICY_KINDS, "-l", MANAGED, "--ignore-not-found")
    cluster.kubectl("delete", POLICY_KINDS, FLOOR, "--ignore-not-found")
    median = {name: statistics.median(ms) for name, ms in rounds.items()}
    return {
        "creates_per_round": CREATES,
        "per_create_ms_by_round": rounds,
        "per_create_ms": {name: round(ms, 4) for name, ms in median.items()},
        "compiled_over_floor": round(median["compiled"] / median["floor"], 3),
        "before_over_floor": round(median["before"] / median["floor"], 3),
        "goal": "compiled per create <= 1.3 x the floor policy's",
    }
