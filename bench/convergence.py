"""B1 (convergence) and B2 (memory), on one fleet of ReplicaSet pods over many fake nodes.

B1: cost patches per second, from operator start until every pod carries its final cost,
against a raw asyncio loop that sends the very same UID-tested JSON Patches with the same
concurrency to the same apiserver. Redundant writes and writes after a restart are counted
from the apiserver's audit log.

B2: the operator's peak RSS while it holds that fleet, against a plain kubernetes_asyncio
list-and-watch of the same pods and nodes that keeps only what the cost engine reads.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import fleet
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess
from schedpolicy import decisions
from schedpolicy.kube import COST_ANNOTATION, Credentials, Kube, cost_patch, pointer

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
    cluster.create_nodes(nodes, timeout=300)
    fleet.namespace(cluster, NAMESPACE)
    fleet.create_in_batches(
        cluster,
        (
            fleet.deployment(f"app-{i:03d}", NAMESPACE, scale.replicas, {"bench": "fleet"})
            for i in range(scale.replicasets)
        ),
        batch=50,
    )
    fleet.wait_for(
        lambda: sum(fleet.running(p) for p in fleet.pods(cluster, NAMESPACE)) == scale.pods,
        f"{scale.pods} fleet pods Running",
        within=1200,
        every=5,
    )
    took = time.monotonic() - started
    print(f"B1: fleet of {scale.pods} pods on {scale.nodes} nodes ready in {took:.0f}s", flush=True)


def expected_costs(cluster: LocalCluster) -> dict[str, tuple[str, str, str]]:
    """uid -> (name, value, uid): what the pure core says, from a snapshot of the cluster."""
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    namespaces = json.loads(cluster.kubectl("get", "namespaces", "-o", "json"))["items"]
    view = decisions.build_view(
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
    queue: asyncio.Queue[tuple[str, list[dict[str, Any]]]] = asyncio.Queue()
    for item in patches:
        queue.put_nowait(item)
    errors = 0

    async def worker() -> None:
        nonlocal errors
        while not queue.empty():
            name, patch = queue.get_nowait()
            try:
                await kube.patch_pod(NAMESPACE, name, patch)
            except Exception:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
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
    env = {"SCHEDPOLICY_PROFILE": str(profile)} if profile else None
    return OperatorProcess(
        cluster.operator_kubeconfig,
        cluster.workdir / "logs" / "schedpolicy-operator.log",
        "--metrics-port=0",
        f"--write-concurrency={scale.write_concurrency}",
        env=env,
    )


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

    # Baseline: the same patches, same concurrency, same apiserver.
    raw_seconds, raw_errors = asyncio.run(_patch_all(cluster, patches, scale.write_concurrency))
    assert all_converged(cluster, expected), "the baseline did not write every cost"
    clear_costs(cluster, scale.write_concurrency)

    # The operator, from process start until the last pod carries its final cost.
    started_at = datetime.now(UTC)
    started = time.monotonic()
    operator = start_operator(cluster, scale, None)
    fleet.wait_for(
        lambda: all_converged(cluster, expected), "the operator to converge", within=900, every=1
    )
    polled = time.monotonic() - started
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

    rss_watch = raw_watch_rss(cluster)
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
        "operator_seconds": round(op_seconds, 2),
        "operator_seconds_polled": round(polled, 2),
        "operator_patches": len(writes),
        "operator_patches_per_second": round(n / op_seconds, 1),
        "ratio": round(raw_seconds / op_seconds, 3),
        "redundant_writes": redundant,
        "writes_after_restart": len(after_restart),
        "goal": "ratio >= 0.7, 0 redundant writes, 0 writes after restart",
    }
    b2 = {
        "name": "B2 memory",
        "scale": scale.name,
        "pods": scale.pods,
        "nodes": scale.nodes,
        "operator_peak_rss_mib": round(rss_operator, 1),
        "baseline_peak_rss_mib": round(rss_watch, 1),
        "ratio": round(rss_operator / rss_watch, 2),
        "goal": "operator <= 200 MiB",
    }
    return b1, b2


def profile_convergence(
    cluster: LocalCluster, scale: Scale, expected: dict[str, tuple[str, str, str]], to: Path
) -> None:
    """One more convergence under pyinstrument, kept apart: profiling slows the operator."""
    clear_costs(cluster, scale.write_concurrency)
    to.parent.mkdir(exist_ok=True)
    operator = start_operator(cluster, scale, to)
    fleet.wait_for(
        lambda: all_converged(cluster, expected), "the profiled run", within=900, every=1
    )
    operator.stop()


def raw_watch_rss(cluster: LocalCluster) -> float:
    """Peak RSS of bench/raw_watch.py holding the same pods and nodes."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.raw_watch", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return float(proc.stdout.strip().splitlines()[-1])
