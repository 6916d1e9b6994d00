"""B1's fleet and the costs it must end with: built once, its expected costs from the pure
core, the patches that write them, and clearing them again between lanes."""

from __future__ import annotations

import asyncio
import json
import time

from bench import fleet
from bench.convergence import patches as patches_
from bench.convergence.patches import Patch
from bench.scale import Scale
from localcluster import LocalCluster
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
Expected = dict[str, tuple[str, str, str]]  # uid -> (name, value, uid)


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


def expected_costs(cluster: LocalCluster) -> Expected:
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


def cost_patches(cluster: LocalCluster, expected: Expected) -> list[Patch]:
    """The UID-tested JSON Patch that writes each pod's expected cost."""
    pods = {p["metadata"]["uid"]: p for p in fleet.pods(cluster, NAMESPACE)}
    return [
        (
            name,
            cost_patch(uid, value, has_annotations=bool(pods[uid]["metadata"].get("annotations"))),
        )
        for name, value, uid in expected.values()
    ]


async def patch_all(
    cluster: LocalCluster, patches: list[Patch], concurrency: int
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


def all_converged(cluster: LocalCluster, expected: Expected) -> bool:
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
    asyncio.run(patch_all(cluster, removals, concurrency))
