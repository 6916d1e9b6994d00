"""What a mutating admission policy costs the apiserver per create, by the apiserver's own
histogram (`apiserver_mutating_admission_policy_check_duration_seconds`, per policy): the
floor policy (it only sets the scheduler), the output policy (the compiled policy's output
for this pod, as constants: floor.py), the bench policy as the compiler made it before
the cuts of issue 49 (bench/profiles/b3-compiled-before.json), and as it makes it now. Each
is alone in force over the same sequential dry-run creates, and they take turns, so that
drift in the machine falls on all of them alike.

The same four are then timed in process by map_cost/ (the apiserver's own patcher, linked
from k8s.io/apiserver): no network, no other work of the apiserver's, and allocations
counted, which a shared two-core machine does not blur."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.admission.floor import BENCH_LABEL, cost_pod, floor_policy, output_policy
from bench.admission.in_turn import serving
from bench.admission.load import NAMESPACE
from bench.admission.metrics import apiserver_metrics
from bench.admission.paths import MANAGED, POLICY_KINDS, go_built
from bench.lanes import order
from localcluster import LocalCluster

CREATES = 400
ROUNDS = 7
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
    body = json.dumps(cost_pod()).encode()
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
    cluster.kubectl("delete", POLICY_KINDS, "-l", BENCH_LABEL, "--ignore-not-found")
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
    """Each policy's check time per create, round by round, and the ratios to the floor;
    then the same policies timed in process."""
    variants = {
        "floor": (floor_policy(scheduler), False),
        "output": (output_policy(), True),
        "before": (before_objects(), True),
        "compiled": (compiled, True),
    }
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(ROUNDS):
        for name in order(list(variants), r):
            objects, hinted = variants[name]
            rounds[name].append(round(per_create_ms(cluster, objects, scheduler, hinted=hinted), 4))
    cluster.kubectl("delete", POLICY_KINDS, "-l", MANAGED, "--ignore-not-found")
    cluster.kubectl("delete", POLICY_KINDS, "-l", BENCH_LABEL, "--ignore-not-found")
    median = {name: statistics.median(ms) for name, ms in rounds.items()}
    return {
        "creates_per_round": CREATES,
        "per_create_ms_by_round": rounds,
        "per_create_ms": {name: round(ms, 4) for name, ms in median.items()},
        "compiled_over_floor": round(median["compiled"] / median["floor"], 3),
        "output_over_floor": round(median["output"] / median["floor"], 3),
        "compiled_over_output": round(median["compiled"] / median["output"], 3),
        "before_over_floor": round(median["before"] / median["floor"], 3),
        "in_process": in_process(
            {name: _policy(objects) for name, (objects, _) in variants.items()}
        ),
        "goal": "compiled per create <= 1.3 x the floor policy's",
    }


def _policy(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The MutatingAdmissionPolicy among a policy's objects (its binding is listed first)."""
    return next(o for o in objects if o["kind"] == "MutatingAdmissionPolicy")


def in_process(variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """map_cost/ on each policy, twice in turn: nanoseconds (median) and allocations per
    create, and each one's ratio to the floor's."""
    binary = go_built("map_cost", Path(tempfile.gettempdir()) / "schedpolicy-map-cost")
    runs: dict[str, list[dict[str, int]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.json" for name in variants}
        for name, policy in variants.items():
            files[name].write_text(json.dumps(policy))
        for r in range(2):
            ordered = order(list(variants), r)
            out = subprocess.run(
                [str(binary), *(str(files[n]) for n in ordered)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for name, line in zip(ordered, out.splitlines(), strict=True):
                runs[name].append(json.loads(line))
    ns = {name: statistics.median(r["ns_per_create"] for r in rs) for name, rs in runs.items()}
    allocs = {name: rs[0]["allocs_per_create"] for name, rs in runs.items()}
    return {
        "us_per_create": {name: round(v / 1000, 1) for name, v in ns.items()},
        "allocs_per_create": allocs,
        "over_floor": {name: round(v / ns["floor"], 2) for name, v in ns.items()},
        "allocs_over_floor": {name: round(v / allocs["floor"], 2) for name, v in allocs.items()},
    }
