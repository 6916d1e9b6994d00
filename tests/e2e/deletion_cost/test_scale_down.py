"""Deletion costs by where the pods run, proven by the real ReplicaSet controller: spot first,
the emptiest node first, whole GPU nodes freed, and the crowded zone first.

Every scenario applies a policy, waits until the operator has written the costs
it should, scales the Deployment down, and checks which pods the controller
actually deleted. Placement is pinned with per-test fake nodes (pod capacity,
CPU, zones), so the expected victims follow from the policy alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.topology import FakeNode
from schedpolicy.app import explain
from schedpolicy.shell.kube import Kube
from tests.e2e.conftest import (
    CAPACITY,
    GPU,
    apply_gpu_fill_policy,
    scale_down,
    start,
    wait_for_costs,
)
from tests.e2e.kubeobjects import PAUSE_IMAGE, deployment, ready_pods, wait_until
from tests.e2e.pools import Pool, apply_namespace_policy, get_json

pytestmark = pytest.mark.e2e


# ---- spot first ---------------------------------------------------------------------------


@pytest.mark.compat
async def test_spot_pods_go_first(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """A spot-first policy: a scale-down removes the replicas on spot nodes first, as
    `kubectl get pods` shows, and `kubectl get spol` counts 6 pods matched, 6 costed, and
    the policy Ready."""
    # One pod per node, three spot and three on-demand nodes: exactly three pods on spot.
    spot = pool.create(
        *(pool.node(f"spot{i}", pods="1", labels={CAPACITY: "spot"}) for i in range(3))
    )
    pool.create(*(pool.node(f"od{i}", pods="1", labels={CAPACITY: "on-demand"}) for i in range(3)))
    spot_nodes = {n.name for n in spot}
    before = await start(api, namespace, 6, pool)
    apply_namespace_policy(
        cluster,
        policies,
        f"spot-{namespace}",
        namespace,
        deletionCost={
            "signals": [{"type": "CapacityType", "capacityType": {"spot": -100, "onDemand": 0}}]
        },
    )

    before = await wait_for_costs(
        api, kube, namespace, lambda p: "-100" if p.spec.node_name in spot_nodes else "0"
    )

    def status_counts() -> dict[str, Any] | None:
        status = dict(get_json(cluster, "spol", f"spot-{namespace}").get("status", {}))
        return status if (status.get("matchedPods"), status.get("costedPods")) == (6, 6) else None

    status = wait_until(status_counts, within=30, what="matchedPods=6 and costedPods=6")
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"

    _, deleted = await scale_down(api, namespace, before, 3)

    assert len(deleted) == 3
    assert {p.spec.node_name for p in deleted} == spot_nodes


# ---- consolidation ------------------------------------------------------------------------


async def other_work(
    api: client.ApiClient,
    namespace: str,
    node: str,
    requests: dict[str, str],
    limits: dict[str, str] | None = None,
) -> None:
    """Work already on a node that is not ours to cost: a bare pod bound to it directly."""
    container = {
        "name": "c",
        "image": PAUSE_IMAGE,
        "resources": {"requests": requests, "limits": limits or {}},
    }
    await client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": f"other-{node}", "labels": {"role": "other"}},
            "spec": {"nodeName": node, "containers": [container]},
        },
    )


async def test_emptiest_node_is_emptied_first(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """A NodeConsolidation policy: the scale-down from 6 to 4 takes both replicas off the
    emptiest of three nodes, the one other work leaves least used."""
    empty, mid, full = pool.create(pool.node("empty"), pool.node("mid"), pool.node("full"))
    for node, cpu in ((mid, "1500m"), (full, "3")):
        await other_work(api, namespace, node.name, {"cpu": cpu})
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "app"}},
        }
    ]
    doc = deployment("app", 6, node_selector=pool.selector)
    doc["spec"]["template"]["spec"]["topologySpreadConstraints"] = spread
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, doc)
    before = await ready_pods(api, namespace, "app=app", 6)
    assert Counter(p.spec.node_name for p in before) == {empty.name: 2, mid.name: 2, full.name: 2}

    apply_namespace_policy(
        cluster,
        policies,
        f"consolidate-{namespace}",
        namespace,
        deletionCost={
            "bucket": 10,
            "signals": [{"type": "NodeConsolidation", "nodeConsolidation": {"points": 1000}}],
        },
    )
    # Fill = requested CPU / 4 CPUs: 0.2/4, (1.5+0.2)/4 and (3+0.2)/4.
    expected = {empty.name: "50", mid.name: "420", full.name: "800"}
    before = await wait_for_costs(api, kube, namespace, lambda p: expected[p.spec.node_name])
    _, deleted = await scale_down(api, namespace, before, 4)

    assert [p.spec.node_name for p in deleted] == [empty.name, empty.name]


def freed_by_ideal(replicas_on: dict[str, int], removed: int) -> set[str]:
    """The offline ideal: empty the nodes holding the fewest replicas first, while the
    removals last. Smallest-first frees the most nodes (every node is worth one)."""
    freed: set[str] = set()
    for node, count in sorted(replicas_on.items(), key=lambda kv: (kv[1], kv[0])):
        if count > removed:
            break
        removed -= count
        freed.add(node)
    return freed


async def gpus_in_use(api: client.ApiClient, namespace: str) -> Counter[str]:
    pods = (await client.CoreV1Api(api).list_namespaced_pod(namespace)).items
    used: Counter[str] = Counter()
    for p in pods:
        if p.metadata.deletion_timestamp is None and p.spec.node_name:
            for c in p.spec.containers:
                limits = (c.resources.limits if c.resources else None) or {}
                used[p.spec.node_name] += int(limits.get("nvidia.com/gpu", "0"))
    return used


@pytest.mark.compat
async def test_gpu_fill_frees_whole_gpu_nodes(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """GPU fill: a scale-down frees whole GPU nodes, the ones an offline ideal frees, where
    CPU fill would keep one busy and split another. `schedpolicy explain pod` names
    nvidia.com/gpu as what decided, and `schedpolicy simulate scale-down` names exactly the
    pods the controller deletes."""

    # Four 8-GPU nodes. Pod capacity pins where the 8 one-GPU replicas land (2, 1, 2, 3),
    # and other work makes CPU fill and GPU fill disagree: a 6-GPU job that needs little
    # CPU on g1, and a CPU-heavy job with no GPU on g2.
    def gpu_node(name: str, pods: str) -> FakeNode:
        return pool.node(name, cpu="32", pods=pods, gpus="8")

    g1, g2, g3, g4 = pool.create(
        gpu_node("g1", "3"), gpu_node("g2", "2"), gpu_node("g3", "2"), gpu_node("g4", "3")
    )
    await other_work(api, namespace, g1.name, {"cpu": "1", GPU: "6"}, {GPU: "6"})
    await other_work(api, namespace, g2.name, {"cpu": "24"})
    doc = deployment("app", 8, node_selector=pool.selector, cpu="2")
    doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, doc)
    before = await ready_pods(api, namespace, "app=app", 8)
    placed = Counter(p.spec.node_name for p in before)
    assert placed == {g1.name: 2, g2.name: 1, g3.name: 2, g4.name: 3}

    apply_gpu_fill_policy(cluster, policies, f"gpu-fill-{namespace}", namespace)
    # GPU fill 8/8, 1/8, 2/8 and 3/8. By CPU (with the other jobs' CPU) the order would be
    # g3 (4 of 32 cores), g1 (5), g4 (6), g2 (26), which would keep g2 busy and split g1.
    expected = {g1.name: "800", g2.name: "100", g3.name: "200", g4.name: "300"}
    before = await wait_for_costs(api, kube, namespace, lambda p: expected[p.spec.node_name])
    out = await explain.explain_pod(kube, f"{namespace}/{before[0].metadata.name}")
    assert out["cost"]["signals"][0]["fill"]["dominant"] == GPU, out["cost"]

    prediction = await explain.simulate_scale_down(kube, f"{namespace}/app", 5)
    assert prediction["certain"], prediction
    _, deleted = await scale_down(api, namespace, before, 5)
    assert {r["pod"] for r in prediction["deleted"]} == {p.metadata.name for p in deleted}

    freeable = {n: c for n, c in placed.items() if n != g1.name}  # g1 runs another GPU job
    ideal = freed_by_ideal(freeable, removed=3)
    assert ideal == {g2.name, g3.name}
    used = await gpus_in_use(api, namespace)
    freed = {n.name for n in (g1, g2, g3, g4) if used[n.name] == 0}
    assert freed == ideal, used


# ---- zones --------------------------------------------------------------------------------


async def test_crowded_zone_loses_replicas(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """A ZoneBalance policy: the zone that holds 5 of 9 replicas loses its 3 newest to the
    scale-down, and every zone keeps 2."""
    pool.create(
        pool.node("za", zone="us-east-1a", pods="5"),
        pool.node("zb", zone="us-east-1b", pods="2"),
        pool.node("zc", zone="us-east-1c", pods="2"),
    )
    before = await start(api, namespace, 9, pool)
    zone_of = {n.name: n.zone for n in pool.nodes}
    assert Counter(zone_of[p.spec.node_name] for p in before) == {
        "us-east-1a": 5,
        "us-east-1b": 2,
        "us-east-1c": 2,
    }

    apply_namespace_policy(
        cluster,
        policies,
        f"zones-{namespace}",
        namespace,
        deletionCost={"signals": [{"type": "ZoneBalance"}]},
    )
    # In the crowded zone, pods rank by age: the two oldest are level with the other zones,
    # the three newer ones stand 1, 2 and 3 pods above them.
    crowded = sorted(
        (p for p in before if zone_of[p.spec.node_name] == "us-east-1a"),
        key=lambda p: (p.metadata.creation_timestamp, p.metadata.name),
    )
    expected = {p.metadata.name: str(-100 * max(0, rank - 1)) for rank, p in enumerate(crowded)}
    before = await wait_for_costs(
        api, kube, namespace, lambda p: expected.get(p.metadata.name, "0")
    )
    assert sorted(expected.values()) == ["-100", "-200", "-300", "0", "0"]
    survivors, _ = await scale_down(api, namespace, before, 6)

    assert Counter(zone_of[p.spec.node_name] for p in survivors) == {
        "us-east-1a": 2,
        "us-east-1b": 2,
        "us-east-1c": 2,
    }
