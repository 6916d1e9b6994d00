"""`simulate scale-down` predicts exactly what the real ReplicaSet controller deletes.

Each scenario shapes a Deployment's pods so that one criterion of the controller's order
decides, runs the same code as `schedpolicy simulate scale-down`, scales down for real, and
compares the deleted pods with the prediction.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.topology import FakeNode
from schedpolicy.app import explain
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.shell.kube import Kube
from tests.e2e.kubeobjects import deployment, eventually, ready_pods

pytestmark = pytest.mark.e2e
POOL = "schedpolicy.io/e2e-pool"


class Scenario:
    def __init__(self, cluster: LocalCluster, api: client.ApiClient, namespace: str) -> None:
        self.cluster, self.api, self.namespace = cluster, api, namespace
        self.tag = uuid.uuid4().hex[:6]
        self.nodes: list[FakeNode] = []
        self.core = client.CoreV1Api(api)

    def node(self, name: str, pods: str = "20") -> FakeNode:
        res = {"cpu": "16", "memory": "32Gi", "pods": pods}
        node = FakeNode(
            f"{name}-{self.tag}", "us-east-1a", "us-east-1", "m5.xlarge", res, res, {POOL: self.tag}
        )
        self.cluster.create_nodes([node])
        self.nodes.append(node)
        return node

    async def deploy(self, replicas: int) -> list[client.V1Pod]:
        doc = deployment("sim", replicas, node_selector={POOL: self.tag})
        await client.AppsV1Api(self.api).create_namespaced_deployment(self.namespace, doc)
        return await ready_pods(self.api, self.namespace, "app=sim", replicas)

    async def scale(self, replicas: int) -> None:
        await client.AppsV1Api(self.api).patch_namespaced_deployment_scale(
            "sim", self.namespace, {"spec": {"replicas": replicas}}
        )

    async def live(self) -> list[client.V1Pod]:
        pods = (await self.core.list_namespaced_pod(self.namespace, label_selector="app=sim")).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    async def status(self, name: str, ready: str, since: datetime, restarts: int = 0) -> None:
        stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        await self.core.patch_namespaced_pod_status(
            name,
            self.namespace,
            {
                "status": {
                    "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": stamp}],
                    "containerStatuses": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "ready": ready == "True",
                            "restartCount": restarts,
                            "state": {"running": {"startedAt": stamp}},
                        }
                    ],
                }
            },
        )

    async def cleanup(self) -> None:
        await self.scale(0)
        await eventually(lambda: self._empty(), what="the scenario's pods gone")
        for node in self.nodes:
            await self.core.delete_node(node.name)

    async def _empty(self) -> bool:
        return not (
            await self.core.list_namespaced_pod(self.namespace, label_selector="app=sim")
        ).items


@pytest.fixture
async def scenario(
    cluster: LocalCluster, api: client.ApiClient, namespace: str
) -> AsyncIterator[Scenario]:
    made = Scenario(cluster, api, namespace)
    yield made
    await made.cleanup()


async def predict_and_scale(
    scenario: Scenario, kube: Kube, replicas: int
) -> tuple[set[str], set[str], dict[str, Any]]:
    before = {p.metadata.name for p in await scenario.live()}
    prediction = await explain.simulate_scale_down(kube, f"{scenario.namespace}/sim", replicas)
    await scenario.scale(replicas)

    async def settled() -> set[str] | None:
        left = {p.metadata.name for p in await scenario.live()}
        return left if len(left) == replicas else None

    after = await eventually(settled, what=f"{replicas} replicas left")
    return {r["pod"] for r in prediction["deleted"]}, before - after, prediction


async def check(scenario: Scenario, kube: Kube, replicas: int, reason: str) -> None:
    predicted, deleted, prediction = await predict_and_scale(scenario, kube, replicas)
    assert prediction["certain"], prediction
    assert predicted == deleted, prediction
    assert {r["reason"] for r in prediction["deleted"]} == {reason}, prediction


@pytest.mark.compat
async def test_mixed_readiness(scenario: Scenario, kube: Kube) -> None:
    """Two of five pods not ready: `simulate scale-down` to 3 names those two, for not being
    ready, and the controller deletes exactly them."""
    scenario.node("a")
    pods = await scenario.deploy(5)
    for pod in pods[:2]:
        await scenario.status(pod.metadata.name, "False", datetime.now(UTC))
    await check(scenario, kube, 3, "not ready")


@pytest.mark.compat
async def test_equal_costs_with_colocation(scenario: Scenario, kube: Kube) -> None:
    """Equal costs: the prediction names a pod that shares its node with more replicas, and
    the controller deletes exactly it."""
    scenario.node("single", pods="1")
    await scenario.deploy(1)
    scenario.node("crowded")
    await scenario.scale(4)
    await ready_pods(scenario.api, scenario.namespace, "app=sim", 4)
    await check(scenario, kube, 1, "more replicas on the same node")


async def test_unassigned_pods(scenario: Scenario, kube: Kube) -> None:
    """Two pods left Pending, unscheduled: the prediction names them first, and the
    controller deletes exactly them."""
    scenario.node("small", pods="3")
    await scenario.deploy(3)
    await scenario.scale(5)  # two more than the node holds: they stay Pending, unassigned

    async def pending() -> bool:
        return sum(1 for p in await scenario.live() if not p.spec.node_name) == 2

    await eventually(pending, what="two unassigned pods")
    await check(scenario, kube, 3, "not scheduled")


async def test_negative_costs(scenario: Scenario, kube: Kube) -> None:
    """Costs set by hand, down to the int32 minimum: the prediction names the lowest-cost
    pods, and the controller deletes exactly them."""
    scenario.node("a")
    pods = await scenario.deploy(5)
    for pod, cost in zip(pods, (-300, -100, 0, 50, -(2**31)), strict=True):
        await scenario.core.patch_namespaced_pod(
            pod.metadata.name,
            scenario.namespace,
            {"metadata": {"annotations": {COST_ANNOTATION: str(cost)}}},
        )
    await check(scenario, kube, 2, "lower pod-deletion-cost")


async def test_restarts(scenario: Scenario, kube: Kube) -> None:
    """Four pods ready at the very same second: `simulate scale-down` names the ones with
    more restarts, so restarts are what decides, and the controller deletes exactly them."""
    scenario.node("a")
    pods = await scenario.deploy(4)
    since = datetime.now(UTC) - timedelta(seconds=30)
    for pod, restarts in zip(pods, (5, 0, 2, 0), strict=True):
        await scenario.status(pod.metadata.name, "True", since, restarts)
    await check(scenario, kube, 2, "more restarts")


async def test_same_creation_second(scenario: Scenario, kube: Kube) -> None:
    """Created together, ready at different seconds on one log2 scale: the UID decides,
    and the prediction has to follow it."""
    scenario.node("a")
    pods = await scenario.deploy(4)
    base = datetime.now(UTC) - timedelta(seconds=100)  # ages ~100s: one log2 bucket (68s..137s)
    for i, pod in enumerate(pods):
        await scenario.status(pod.metadata.name, "True", base - timedelta(seconds=i))
    await check(scenario, kube, 2, "ready on the same log scale: UID order")


async def test_order_dependent_cycle(scenario: Scenario, kube: Kube) -> None:
    """Upstream's comparison is not transitive: a and b ready in the same second (a restarted
    once), c a second later on the same log2 scale, UIDs b < c < a. Which one goes depends on
    the order the controller's informer lists them; simulate says so and names all three."""
    scenario.node("a")
    pods = await scenario.deploy(3)
    b, c, a = sorted(pods, key=lambda p: p.metadata.uid)
    since = datetime.now(UTC) - timedelta(seconds=100)  # ~100 s old: one log2 bucket
    await scenario.status(a.metadata.name, "True", since, restarts=1)
    await scenario.status(b.metadata.name, "True", since)
    await scenario.status(c.metadata.name, "True", since + timedelta(seconds=1))
    await asyncio.sleep(1)  # the controller's informer sees the statuses before the scale
    _, deleted, prediction = await predict_and_scale(scenario, kube, 2)
    assert not prediction["certain"], prediction
    doubt = prediction["uncertain"]
    names = {a.metadata.name, b.metadata.name, c.metadata.name}
    assert set(doubt["candidates"]) == names
    assert doubt["deleted"] == 1
    assert f"{a.metadata.name} before {b.metadata.name} by more restarts" in doubt["why"]
    assert doubt["why"].count("UID order") == 2
    assert len(deleted) == 1
    assert deleted <= names
