"""B1 (convergence) and B2 (memory), on one fleet of ReplicaSet pods over many fake nodes.

B1: cost patches per second, from controller start until every pod carries its final
cost, against two baselines on the same apiserver with the same UID-tested JSON Patches
and the same concurrency: a raw asyncio loop that only sends them, and a bare client that
first streams every pod and keeps its watch open meanwhile (bench/watching_client.py), the
least any watching controller costs. Redundant writes and writes after a restart are
counted from the apiserver's audit log; CPU seconds per 1,000 pod events from /proc.

B2: the controller's and the webhook's peak RSS while they hold that fleet, against the
physical floor (bench/floor.py): the interpreter with our imports and nothing held, plus
the encoded bytes of every record the view keeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import fleet, profiled, watching_client
from bench import patches as patches_
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess, controller
from localcluster.webhook import LoopbackWebhook
from schedpolicy.core.deletion_cost.patches import cost_patch, pointer
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from schedpolicy.view import snapshot
from schedpolicy.view.deletion_cost import decisions

NAMESPACE = "bench-fleet"
POLICY = {
    "apiVersion": "schedpolicy.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {"name": "bench-fleet"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
        "deletionCost": {
            "minUpdateIntervalSeconds": 0,
            "signals": [
                {"type": "CapacityType", "capacityType": {"spot": -300, "onDemand": 0}},
                {"type": "NodeConsolidation", "nodeConsolidation": {"points": 300}},
                {"type": "ZoneBalance", "zoneBalance": {"pointsPerExcessPod": -100}},
            ],
        },
    },
}


def build_fleet(cluster: LocalCluster, scale: Scale) -> None:
    started = time.monotonic()
    nodes = fleet.fake_nodes("fleet", scale.nodes)
    # About 11 pods/s and 10 nodes/s here: the budgets grow with the fleet (30k pods at large).
    budget = max(1800.0, scale.pods * 0.2)
    cluster.create_nodes(nodes, timeout=max(300.0, scale.nodes * 0.3))
    fleet.namespace(cluster, NAMESPACE)
    fleet.create_in_batches(
        cluster,
        (
            fleet.deployment(f"app-{i:03d}", NAMESPACE, scale.replicas, {"bench": "fleet"})
            for i in range(scale.replicasets)
        ),
        batch=50,
    )
    # The ReplicaSets' own counts say cheaply when every pod exists; their ready counts
    # lag far behind under this load, so the pods themselves say when all run.
    fleet.wait_for(
        lambda: fleet.replicas(cluster, NAMESPACE, "replicas") >= scale.pods,
        f"{scale.pods} fleet pods created",
        within=budget,
        every=5,
    )
    fleet.wait_for(
        lambda: fleet.not_running(cluster, NAMESPACE) == 0,
        f"{scale.pods} fleet pods Running",
        within=budget,
        every=15,
    )
    took = time.monotonic() - started
    print(f"B1: fleet of {scale.pods} pods on {scale.nodes} nodes ready in {took:.0f}s", flush=True)


def expected_costs(cluster: LocalCluster) -> dict[str, tuple[str, str, str]]:
    """uid -> (name, value, uid): what the pure core says, from a snapshot of the cluster."""
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    namespaces = json.loads(cluster.kubectl("get", "namespaces", "-o", "json"))["items"]
    view = snapshot.build_view(
        policies=[POLICY], nodes=nodes, namespaces=namespaces, pods=fleet.pods(cluster, NAMESPACE)
    )
    out = {}
    for uid, final in decisions.expected_costs(view).items():
        assert final is not None
        out[uid] = (view.pods[uid].name, str(final), uid)
    return out


async def _patch_all(
    cluster: LocalCluster, patches: list[tuple[str, list[dict[str, Any]]]], concurrency: int
) -> tuple[float, int]:
    """The raw baseline: a bounded pool of coroutines sending JSON Patches. (seconds, errors)"""
    # The operator's own credentials, so the apiserver does the same authentication work.
    kube = await Kube.connect(
        Credentials(kubeconfig=str(cluster.operator_kubeconfig)), "bench-baseline"
    )
    started = time.perf_counter()
    errors = await patches_.send(kube, NAMESPACE, patches, concurrency)
    elapsed = time.perf_counter() - started
    await kube.close()
    return elapsed, errors


def all_converged(cluster: LocalCluster, expected: dict[str, tuple[str, str, str]]) -> bool:
    for pod in fleet.pods(cluster, NAMESPACE):
        want = expected.get(pod["metadata"]["uid"])
        if (
            want is None
            or (pod["metadata"].get("annotations") or {}).get(COST_ANNOTATION) != want[1]
        ):
            return False
    return True


def wait_converged(
    cluster: LocalCluster,
    operator: OperatorProcess,
    expected: dict[str, tuple[str, str, str]],
    what: str,
) -> None:
    """Until every pod carries its expected cost.

    The operator's own write counter is the cheap probe, scraped every second; the pods
    are listed only once it says it is done. Listing 10k pods every second would load the
    apiserver during the operator's run but not during the baselines', which are timed in
    process, and so make the comparison unfair.
    """

    def done() -> bool:
        try:
            ok = operator.metric("schedpolicy_cost_writes_total", result="ok") or 0
        except OSError:  # not serving its metrics yet
            return False
        return ok >= len(expected) and all_converged(cluster, expected)

    fleet.wait_for(done, what, within=3600, every=1)


def clear_costs(cluster: LocalCluster, concurrency: int) -> None:
    path = pointer("metadata", "annotations", COST_ANNOTATION)
    removals = [
        (
            p["metadata"]["name"],
            [
                {"op": "test", "path": "/metadata/uid", "value": p["metadata"]["uid"]},
                {"op": "remove", "path": path},
            ],
        )
        for p in fleet.pods(cluster, NAMESPACE)
        if COST_ANNOTATION in (p["metadata"].get("annotations") or {})
    ]
    asyncio.run(_patch_all(cluster, removals, concurrency))


def start_operator(cluster: LocalCluster, scale: Scale, profile: Path | None) -> OperatorProcess:
    """The controller with the scale's write concurrency; under pyinstrument (bench.profiled)
    writing to `profile` when one is given."""
    concurrency = f"--write-concurrency={scale.write_concurrency}"
    if profile is None:
        return controller(cluster, concurrency)
    return controller(cluster, concurrency, module=profiled.MODULE, env=profiled.env(profile))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pod_events(operator: OperatorProcess) -> float:
    return sum(
        operator.metric("schedpolicy_watch_events_total", kind="pods", type=t) or 0
        for t in ("ADDED", "MODIFIED", "DELETED")
    )


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def webhook_rss(cluster: LocalCluster) -> tuple[float, float]:
    """(peak, idle after sync) RSS of `schedpolicy webhook` holding this cluster's view."""
    # Plain HTTP and no /metrics: the view and the server, nothing else.
    loopback = LoopbackWebhook(cluster, cluster.workdir / "bench-webhook-rss-pki", "bench-rss")
    log = cluster.workdir / "logs" / "schedpolicy-webhook.log"
    hook = loopback.start(log, tls=False, metrics=False, timeout=300)
    try:
        time.sleep(2)
        return hook.peak_rss_mib(), rss_mib(hook.proc.pid)
    finally:
        hook.stop()


def run_b1_b2(
    cluster: LocalCluster, scale: Scale, out: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    build_fleet(cluster, scale)
    cluster.kubectl("apply", "-f", "-", objects=[POLICY])
    expected = expected_costs(cluster)
    pods = {p["metadata"]["uid"]: p for p in fleet.pods(cluster, NAMESPACE)}
    patches = [
        (
            name,
            cost_patch(uid, value, has_annotations=bool(pods[uid]["metadata"].get("annotations"))),
        )
        for name, value, uid in expected.values()
    ]

    # Baselines: the same patches, same concurrency, same apiserver.
    raw_seconds, raw_errors = asyncio.run(_patch_all(cluster, patches, scale.write_concurrency))
    assert all_converged(cluster, expected), "the raw baseline did not write every cost"
    clear_costs(cluster, scale.write_concurrency)
    watching_seconds, watching_errors = asyncio.run(
        watching_client.stream_then_patch(
            str(cluster.operator_kubeconfig), NAMESPACE, patches, scale.write_concurrency
        )
    )
    assert all_converged(cluster, expected), "the watching baseline did not write every cost"
    clear_costs(cluster, scale.write_concurrency)

    # The operator, from process start until the last pod carries its final cost.
    started_at = datetime.now(UTC)
    started = time.monotonic()
    operator = start_operator(cluster, scale, None)
    wait_converged(cluster, operator, expected, "the operator to converge")
    polled = time.monotonic() - started
    cpu = cpu_seconds(operator.proc.pid)
    events = pod_events(operator)
    idle_controller = rss_mib(operator.proc.pid)
    writes = [e for e in writes_by(cluster.audit_log, since=started_at) if e.resource == "pods"]
    last = max(e.at for e in writes)
    op_seconds = (last - started_at).total_seconds()
    per_pod = Counter(e.name for e in writes)
    redundant = sum(n - 1 for n in per_pod.values())
    rss_operator = operator.peak_rss_mib()

    # A restart must write nothing.
    restarted_at = datetime.now(UTC)
    operator.stop()
    operator = start_operator(cluster, scale, None)
    operator.wait_for_log("view synced", timeout=300)
    time.sleep(10)
    after_restart = [
        e for e in writes_by(cluster.audit_log, since=restarted_at) if e.resource == "pods"
    ]
    operator.stop()

    b2 = _b2(cluster, scale, rss_operator, idle_controller)
    profile_convergence(cluster, scale, expected, out.parent / "profiles" / "b1-operator.txt")
    n = len(patches)
    b1 = {
        "name": "B1 convergence",
        "scale": scale.name,
        "pods": scale.pods,
        "nodes": scale.nodes,
        "concurrency": scale.write_concurrency,
        "baseline_seconds": round(raw_seconds, 2),
        "baseline_patches_per_second": round(n / raw_seconds, 1),
        "baseline_errors": raw_errors,
        "watching_seconds": round(watching_seconds, 2),
        "watching_patches_per_second": round(n / watching_seconds, 1),
        "watching_errors": watching_errors,
        "ratio_vs_watching": round(watching_seconds / op_seconds, 3),
        "cpu_seconds": round(cpu, 2),
        "pod_events": int(events),
        "cpu_seconds_per_1000_pod_events": round(1000 * cpu / events, 3) if events else None,
        "operator_seconds": round(op_seconds, 2),
        "operator_seconds_polled": round(polled, 2),
        "operator_patches": len(writes),
        "operator_patches_per_second": round(n / op_seconds, 1),
        "ratio": round(raw_seconds / op_seconds, 3),
        "redundant_writes": redundant,
        "writes_after_restart": len(after_restart),
        "goal": "vs watching >= 0.8, vs raw >= 0.7, 0 redundant writes, 0 after restart",
    }
    return b1, b2


def _b2(
    cluster: LocalCluster, scale: Scale, rss_operator: float, idle_controller: float
) -> dict[str, Any]:
    """B2's figures, given the controller's peak and idle RSS over one convergence."""
    hook_peak, hook_idle = webhook_rss(cluster)
    floor_idle, held, held_pods, held_nodes = floor(cluster)
    floor_mib = floor_idle + held / 2**20
    return {
        "name": "B2 memory",
        "scale": scale.name,
        "pods": scale.pods,
        "nodes": scale.nodes,
        "operator_peak_rss_mib": round(rss_operator, 1),
        "operator_rss_after_convergence_mib": round(idle_controller, 1),
        "webhook_peak_rss_mib": round(hook_peak, 1),
        "webhook_idle_rss_mib": round(hook_idle, 1),
        "floor_mib": round(floor_mib, 1),
        "floor_idle_interpreter_mib": round(floor_idle, 1),
        "floor_held_bytes": held,
        "floor_held_bytes_per_pod": round(held / max(held_pods, 1)),
        "floor_pods": held_pods,
        "floor_nodes": held_nodes,
        "ratio_to_floor": round(rss_operator / floor_mib, 2),
        "goal": "controller <= 200 MiB at 10k pods, <= 4 KiB marginal per pod",
    }


def run_b2(cluster: LocalCluster, scale: Scale) -> dict[str, Any]:
    """B2 alone (`--only B2`): the fleet and one convergence, without B1's baselines, its
    restart check and its profile. A 30k-pod fleet starts at a few pods a second here, so
    the large point is worth measuring without the three extra converges."""
    build_fleet(cluster, scale)
    cluster.kubectl("apply", "-f", "-", objects=[POLICY])
    expected = expected_costs(cluster)
    operator = start_operator(cluster, scale, None)
    wait_converged(cluster, operator, expected, "the operator to converge")
    idle, peak = rss_mib(operator.proc.pid), operator.peak_rss_mib()
    operator.stop()
    return _b2(cluster, scale, peak, idle)


def profile_convergence(
    cluster: LocalCluster, scale: Scale, expected: dict[str, tuple[str, str, str]], to: Path
) -> None:
    """One more convergence under pyinstrument, kept apart: profiling slows the operator."""
    clear_costs(cluster, scale.write_concurrency)
    to.parent.mkdir(exist_ok=True)
    operator = start_operator(cluster, scale, to)
    wait_converged(cluster, operator, expected, "the profiled run")
    operator.stop()


def floor(cluster: LocalCluster) -> tuple[float, int, int, int]:
    """(idle interpreter MiB, encoded record bytes, pods, nodes), from bench/floor.py."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.floor", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    idle, held, pods, nodes = proc.stdout.strip().splitlines()[-1].split()
    return float(idle), int(held), int(pods), int(nodes)
