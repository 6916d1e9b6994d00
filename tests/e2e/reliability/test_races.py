"""Races and contention, judged from what the apiserver stored, never from the operator's
logs: a pod replaced under a pending write, and policies that conflict."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.audit import writes_by
from schedpolicy.core.wellknown import COST_ANNOTATION
from tests.e2e.conftest import CAPACITY, WARM
from tests.e2e.kubeobjects import PAUSE_IMAGE, deployment, eventually, ready_pods, wait_until
from tests.e2e.pools import Pool, apply, apply_namespace_policy, get_json, namespace_policy
from tests.e2e.reliability.conftest import Start, cost_writes, restart_stopped_components


async def test_uid_race_gives_the_new_pod_no_stale_cost(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    """A pod replaced by another of the same name gets no stale cost: the write the operator
    had pending (rate-limited) for the old one never lands on the new one. The controller
    manager is stopped so that the hand-made replacement, owned by the same ReplicaSet, is
    left alone."""
    pool.create(pool.node("race"))
    core = client.CoreV1Api(api)
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "racer"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "racer"}},
            "template": {
                "metadata": {"labels": {"app": "racer"}},
                "spec": {
                    "nodeSelector": pool.selector,
                    "containers": [{"name": "c", "image": PAUSE_IMAGE}],
                },
            },
        },
    }
    owner = await client.AppsV1Api(api).create_namespaced_replica_set(namespace, rs)
    (old,) = await ready_pods(api, namespace, "app=racer", 1)
    apply_namespace_policy(
        cluster,
        policies,
        f"race-{namespace}",
        namespace,
        deletionCost={
            "minUpdateIntervalSeconds": 30,
            "signals": [
                {"type": "PodCondition", "podCondition": {"conditionType": WARM, "points": 800}}
            ],
        },
    )
    start_operator("--verbose")

    async def warm(name: str, status: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        await core.patch_namespaced_pod_status(
            name,
            namespace,
            {
                "status": {
                    "conditions": [{"type": WARM, "status": status, "lastTransitionTime": now}]
                }
            },
        )

    async def stored(name: str) -> str | None:
        pod = await core.read_namespaced_pod(name, namespace)
        return (pod.metadata.annotations or {}).get(COST_ANNOTATION)

    await eventually(lambda: _is(stored(old.metadata.name), "0"), what="the first cost")
    await warm(old.metadata.name, "True")  # wants 800, but the last write was < 30s ago
    cluster.stop_component("kube-controller-manager")
    try:
        await core.delete_namespaced_pod(old.metadata.name, namespace, grace_period_seconds=0)
        await eventually(lambda: _gone(core, old.metadata.name, namespace), what="the old pod gone")
        replaced_at = datetime.now(UTC)
        new = await core.create_namespaced_pod(
            namespace,
            {
                "metadata": {
                    "name": old.metadata.name,
                    "labels": {"app": "racer"},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "racer",
                            "uid": owner.metadata.uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeSelector": pool.selector,
                    "containers": [{"name": "c", "image": PAUSE_IMAGE}],
                },
            },
        )
        assert new.metadata.uid != old.metadata.uid
        await asyncio.sleep(35)  # past the rate limit of the old pod's pending write
        assert await stored(new.metadata.name) in (None, "0")
        for event in cost_writes(cluster, namespace, replaced_at):
            if event.code == 200 and isinstance(event.request, list):
                guard = [op["value"] for op in event.request if op.get("path") == "/metadata/uid"]
                assert guard == [new.metadata.uid]
    finally:
        cluster.start_component("kube-controller-manager")


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


async def _gone(core: client.CoreV1Api, name: str, namespace: str) -> bool:
    pods = (await core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}")).items
    return not pods


async def test_conflicting_policies_settle_and_do_not_flap(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    """Two cost policies and two label policies of equal priority over the same pods and
    nodes: the first by name wins, every one of them says Conflicting, and in two quiet
    minutes nothing is written back and forth."""
    gfd = {"nvidia.com/gpu.product": "NVIDIA-A10G", "nvidia.com/gpu.memory": "23028"}
    pool.create(
        *(
            pool.node(
                f"g{i}",
                instance_type="g5.12xlarge",
                gpus="4",
                cpu="48",
                labels={CAPACITY: "spot", **gfd},
            )
            for i in range(2)
        )
    )
    await client.AppsV1Api(api).create_namespaced_deployment(
        namespace, deployment("app", 6, node_selector=pool.selector, cpu="10m")
    )
    await ready_pods(api, namespace, "app=app", 6)
    names = {key: f"{key}-{pool.tag}" for key in ("a-cost", "b-cost", "a-labels", "b-labels")}
    policies.extend(names.values())
    apply(
        cluster,
        namespace_policy(
            names["a-cost"],
            namespace,
            priority=50,
            deletionCost={"signals": [{"type": "CapacityType", "capacityType": {"spot": -200}}]},
        ),
    )
    apply(
        cluster,
        namespace_policy(
            names["b-cost"],
            namespace,
            priority=50,
            deletionCost={"signals": [{"type": "CapacityType", "capacityType": {"spot": 300}}]},
        ),
    )
    for key, sources in (("a-labels", ["GPUFeatureDiscovery"]), ("b-labels", ["InstanceType"])):
        apply(
            cluster,
            {
                "apiVersion": "schedpolicy.io/v1alpha1",
                "kind": "SchedulingPolicy",
                "metadata": {"name": names[key]},
                "spec": {
                    "priority": 50,
                    "nodeLabels": {
                        "gpu": {"sources": sources, "nodeSelector": {"matchLabels": pool.selector}}
                    },
                },
            },
        )
    start_operator()

    def settled() -> bool:
        pods = get_json(cluster, "pods", "-n", namespace, "-l", "app=app")["items"]
        nodes = [get_json(cluster, "node", n.name) for n in pool.nodes]
        return all(
            p["metadata"].get("annotations", {}).get(COST_ANNOTATION) == "-200" for p in pods
        ) and all(
            n["metadata"]["labels"].get("schedpolicy.io/gpu-memory-mib") == "23028" for n in nodes
        )

    await asyncio.to_thread(wait_until, settled, within=60, what="the name-first policies to win")
    for name in names.values():
        cond = {c["type"]: c for c in get_json(cluster, "spol", name)["status"]["conditions"]}[
            "Conflicting"
        ]
        assert cond["status"] == "True", name
    quiet_from = datetime.now(UTC)
    await asyncio.sleep(120)
    writes = [
        e
        for e in writes_by(cluster.audit_log, since=quiet_from)
        if (e.resource == "pods" and e.namespace == namespace)
        or (e.resource == "nodes" and e.name in {n.name for n in pool.nodes})
    ]
    assert writes == []
    assert settled()


@pytest.fixture(autouse=True)
def _keep_the_control_plane_whole(cluster: LocalCluster) -> Iterator[None]:
    """Whatever a fault test does to the components, the next test finds all of them up."""
    yield
    restart_stopped_components(cluster)
