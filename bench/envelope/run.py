"""B8, the envelope: the fleet grown in three steps toward 150k pods on 5k nodes; at each,
a fresh controller converges it and is restarted over it, and every process of the install
is measured from /proc; at the last, churn (bench.envelope.churn).

The control plane is set for the size first (reconfigure): leases that a fleet of 5k fake
nodes can renew without drowning the apiserver, and no component that would redo the
bench's own work (the ReplicaSet and Deployment controllers, the default scheduler).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.convergence.process import cpu_seconds, pod_events, start_operator, webhook_rss
from bench.envelope import api as api_
from bench.envelope import churn, memory
from bench.envelope.api import Api
from bench.envelope.fleet import LABEL, REPLICAS, STEPS, Grown, Step, grow
from bench.envelope.verify import Costs, expected, wrong
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.controller_manager import ControllerManager
from localcluster.kwok import Kwok
from localcluster.operator_process import OperatorProcess
from localcluster.scheduler import Scheduler

POLICY = {
    "apiVersion": "schedpolicy.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {"name": "envelope"},
    "spec": {
        "namespaceSelector": {"matchLabels": LABEL},
        # The CRD's defaults otherwise (bucket 100, minUpdateIntervalSeconds 10), as an admin
        # would run it: the first write to a pod is never held by the interval.
        "deletionCost": {
            "signals": [
                {"type": "CapacityType", "capacityType": {"spot": -300, "onDemand": 0}},
                {"type": "NodeConsolidation", "nodeConsolidation": {"points": 300}},
                {"type": "ZoneBalance", "zoneBalance": {"pointsPerExcessPod": -100}},
            ],
        },
    },
}
# A 5k-node fleet renewing 40 s leases every 10 s sends the apiserver 500 writes a second
# before any pod exists; 20-minute leases renew every 5 minutes (17 a second), and the node
# lifecycle controller waits an hour before it calls a silent node lost.
LEASE_SECONDS = 1200
NODE_GRACE = "3600s"
KWOK_CONFIG = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
"""


def reconfigure(cluster: LocalCluster) -> list[str]:
    """The control plane as B8 runs it; what was changed, for the report."""
    sup = cluster.supervisor
    cluster.stop_component(Scheduler.name)
    kcm = sup.get(ControllerManager.name)
    assert kcm is not None
    argv = [
        a if not a.startswith("--controllers=") else _without(a, "replicaset", "deployment")
        for a in kcm.argv
    ]
    sup.stop(ControllerManager.name)
    sup.start(ControllerManager.name, [*argv, f"--node-monitor-grace-period={NODE_GRACE}"])
    kwok = sup.get(Kwok.name)
    assert kwok is not None
    config = cluster.workdir / "kwok-envelope.yaml"
    config.write_text(KWOK_CONFIG)
    argv = [a for a in kwok.argv if not a.startswith("--node-lease-duration-seconds=")]
    sup.stop(Kwok.name)
    sup.start(
        Kwok.name, [*argv, f"--config={config}", f"--node-lease-duration-seconds={LEASE_SECONDS}"]
    )
    time.sleep(5)
    for name in (ControllerManager.name, Kwok.name):
        record = sup.get(name)
        if record is None or not record.alive():
            raise RuntimeError(f"{name} did not survive B8's settings; see {cluster.workdir}/logs")
    return [
        "the default kube-scheduler stopped (pods are created bound)",
        "kube-controller-manager without the ReplicaSet and Deployment controllers"
        f" (the bench creates the pods), node monitor grace {NODE_GRACE}",
        f"KWOK leases of {LEASE_SECONDS} s (renewed every {LEASE_SECONDS // 4} s),"
        " 16 pod stages in parallel",
    ]


def _without(flag: str, *controllers: str) -> str:
    kept = [
        c
        for c in flag.partition("=")[2].split(",")
        if c.removesuffix("-controller") not in controllers
    ]
    return "--controllers=" + ",".join(kept)


def converge(cluster: LocalCluster, scale: Scale, before: Costs) -> dict[str, Any]:
    """A fresh controller over the fleet: from its start until the last pod carries its final
    cost; then its memory settled, and a restart over the converged fleet."""
    to_write = len(wrong(before))
    started = time.monotonic()
    op = start_operator(cluster, scale, None)
    op.wait_for_log("view synced", timeout=1800)
    synced = time.monotonic() - started
    while (op.metric("schedpolicy_cost_writes_total", result="ok") or 0) < to_write:
        time.sleep(1)
    seconds = time.monotonic() - started
    after = api_.run(lambda api: expected(api, POLICY), cluster)
    left = len(wrong(after))
    deadline = time.monotonic() + 300
    while left and time.monotonic() < deadline:
        time.sleep(10)
        after = api_.run(lambda api: expected(api, POLICY), cluster)
        left = len(wrong(after))
    cpu, events = cpu_seconds(op.proc.pid), pod_events(op)
    writes = op.metric("schedpolicy_cost_writes_total", result="ok") or 0
    time.sleep(30)
    out: dict[str, Any] = {
        "pods": len(after.costs),
        "to_write": to_write,
        "writes": int(writes),
        "wrong_after": left,
        "seconds_to_sync": round(synced, 1),
        "seconds_to_converge": round(seconds, 1),
        "writes_per_second": round(to_write / max(seconds - synced, 1e-9), 1),
        "cpu_seconds": round(cpu, 1),
        "pod_events": int(events),
        "cpu_seconds_per_1000_pod_events": round(1000 * cpu / events, 3) if events else None,
        "controller": memory.of(op.proc.pid),
    }
    out["restart"] = restart(cluster, scale, op)
    return out


def restart(cluster: LocalCluster, scale: Scale, op: OperatorProcess) -> dict[str, Any]:
    """The admin's question after an upgrade: how long until costs are right again. Over a
    converged fleet they already are; the restarted controller must list, sync and write
    nothing."""
    op.stop()
    started = time.monotonic()
    again = start_operator(cluster, scale, None)
    again.wait_for_log("view synced", timeout=1800)
    synced = time.monotonic() - started
    time.sleep(15)
    writes = again.metric("schedpolicy_cost_writes_total", result="ok") or 0
    out = {"seconds_to_sync": round(synced, 1), "writes": int(writes), **memory.of(again.proc.pid)}
    again.stop()
    return out


def measure_step(
    cluster: LocalCluster, scale: Scale, index: int, step: Step, grown: Grown
) -> dict[str, Any]:
    before = api_.run(lambda api: expected(api, POLICY), cluster)
    converged = converge(cluster, scale, before)
    hook_peak, hook_idle = webhook_rss(cluster)
    return {
        "step": index,
        "pods": step.pods,
        "nodes": step.nodes,
        "created": {
            "pods": len(grown.pods),
            "nodes": len(grown.nodes),
            "node_seconds": grown.node_seconds,
            "pod_seconds": grown.pod_seconds,
            "pods_per_second": grown.pods_per_second,
            "seconds_until_running": grown.running_seconds,
            "refused": grown.refused,
            "halted": grown.halted,
        },
        **converged,
        "webhook": {"peak_mib": round(hook_peak, 1), "idle_mib": round(hook_idle, 1)},
        "control_plane": memory.control_plane(cluster),
    }


def run_b8(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    size = "full" if scale.name != "small" else "small"
    steps, replicas = STEPS[size], REPLICAS[size]
    changes = reconfigure(cluster)
    cluster.kubectl("apply", "-f", "-", objects=[POLICY])
    results: list[dict[str, Any]] = []
    pods: list[tuple[str, str, str]] = []
    nodes: list[str] = []
    previous = Step(0, 0)
    stopped = None
    for index, step in enumerate(steps):

        async def add(
            api: Api, i: int = index, before: Step = previous, after: Step = step
        ) -> Grown:
            return await grow(api, i, before, after, replicas)

        grown = api_.run(add, cluster, concurrency=48)
        pods += grown.pods
        nodes += grown.nodes
        print(
            f"B8 step {index}: {step.pods} pods on {step.nodes} nodes; created at"
            f" {grown.pods_per_second} pods/s, all Running after {grown.running_seconds} s",
            flush=True,
        )
        reached = Step(previous.pods + len(grown.pods), previous.nodes + len(grown.nodes))
        results.append(measure_step(cluster, scale, index, reached, grown))
        print(f"B8 step {index}: {results[-1]}", flush=True)
        previous = reached
        if grown.halted:
            stopped = grown.halted
            break
    churned = churn.run(cluster, scale, POLICY, pods, nodes, size)
    return {
        "name": "B8 envelope",
        "scale": size,
        "control_plane_changes": changes,
        "steps": results,
        "stopped": stopped,
        "churn": churned,
        "goal": (
            "controller <= 400 MiB peak at 150k pods; churn cost lag p99 <= 2 s, 0 lost; the"
            " chart's limits hold every process with >= 25% headroom"
        ),
    }
