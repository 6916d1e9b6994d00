"""schedpolicy beside a real Karpenter (v1.15, its KWOK cloud provider): the cluster, the
operator's processes, and what the tests here build and read.

The cluster here has no fixed nodes: Karpenter launches every node from the NodePools the
harness gives it, the KWOK controller runs them, and Karpenter consolidates them. The
controller, the webhook and the chart's scheduler run as in the other e2e tests. What is
asserted is what the apiserver stored and what Karpenter and the ReplicaSet controller did.

The cluster and the processes start once for the whole package, in .cluster/pytest-karpenter/.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from localcluster import LocalCluster, binaries
from localcluster.binaries import REPO
from localcluster.karpenter import KarpenterOptions
from localcluster.operator_process import OperatorProcess, running
from localcluster.webhook import LoopbackWebhook
from tests.e2e import kubeobjects
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import get_json

WORKDIR = REPO / ".cluster" / "pytest-karpenter"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
KARPENTER_USER = "karpenter"
# Spot pods go first, for the ReplicaSet controller and for Karpenter alike.
SPOT_FIRST = {
    "signals": [{"type": "CapacityType", "capacityType": {"spot": -500, "onDemand": 0}}],
    "karpenterDisruptionCost": {},
}


@pytest.fixture(scope="package")
def kcluster() -> Iterator[LocalCluster]:
    """A cluster of Karpenter's nodes only, with the operator's two processes running."""
    if binaries.lane():
        pytest.skip("Karpenter runs against the target Kubernetes only")
    cluster = LocalCluster(WORKDIR)
    cluster.up(nodes=[], karpenter_options=KarpenterOptions())
    try:
        cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            "crd/schedulingpolicies.schedpolicy.io",
        )  # fmt: skip
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="package")
def processes(
    kcluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The controller and the webhook, registered through the chart's webhook configuration."""
    webhook = LoopbackWebhook(kcluster, tmp_path_factory.mktemp("pki"), "schedpolicy-karpenter")
    with running(kcluster, "--verbose") as proc:
        hook = webhook.start(kcluster.workdir / "logs" / "schedpolicy-webhook.log", "--verbose")
        webhook.register()
        try:
            yield proc
        finally:
            webhook.unregister()
            hook.stop()


@pytest.fixture
def ns(kcluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own; it and the policies named after it go afterwards."""
    name = f"k-{request.node.name.lower().replace('_', '-')[:30].strip('-')}-{uuid.uuid4().hex[:4]}"
    kcluster.kubectl("create", "namespace", name)
    wait_until(
        lambda: kcluster.kubectl("get", "sa", "default", "-n", name, check=False),
        what=f"serviceaccount {name}/default",
    )
    yield name
    kcluster.kubectl("delete", "namespace", name, "--wait=false")
    for policy in json.loads(kcluster.kubectl("get", "schedulingpolicies", "-o", "json"))["items"]:
        if name in policy["metadata"]["name"]:
            kcluster.kubectl("delete", "schedulingpolicy", policy["metadata"]["name"])


def deployment(
    name: str,
    replicas: int,
    *,
    cpu: str = "1500m",
    gpus: int = 0,
    node_selector: dict[str, str] | None = None,
    spread_over: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """kubeobjects' Deployment, with memory asked for (Karpenter sizes nodes by it too), GPUs,
    a spread over `spread_over` and pod annotations."""
    doc = kubeobjects.deployment(name, replicas, node_selector=node_selector, cpu=cpu)
    template = doc["spec"]["template"]
    resources = template["spec"]["containers"][0]["resources"]
    resources["requests"]["memory"] = "256Mi"
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if spread_over:
        template["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": spread_over,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": name}},
            }
        ]
    template["metadata"]["annotations"] = annotations or {}
    return doc


def pods(cluster: LocalCluster, ns: str, app: str) -> list[dict[str, Any]]:
    listed = get_json(cluster, "pods", "-n", ns, "-l", f"app={app}")["items"]
    return [p for p in listed if not p["metadata"].get("deletionTimestamp")]


def running_pods(cluster: LocalCluster, ns: str, app: str, count: int) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        found = pods(cluster, ns, app)
        up = [p for p in found if p["status"].get("phase") == "Running"]
        return up if len(found) == count and len(up) == count else None

    return wait_until(probe, within=120, what=f"{count} running pods of {app}")


def node_claims(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    """NodeClaims by the node they launched."""
    listed = get_json(cluster, "nodeclaims")["items"]
    return {c["status"]["nodeName"]: c for c in listed if c.get("status", {}).get("nodeName")}


def claims_of(cluster: LocalCluster, names: set[str]) -> dict[str, dict[str, Any]]:
    """NodeClaims by node, once each of `names` shows in one. Karpenter untaints a node it
    registers a moment before it writes the node's name into its NodeClaim's status, and a
    pod can be bound and Running in between; a node no NodeClaim ever names still fails."""

    def named() -> dict[str, dict[str, Any]] | None:
        claims = node_claims(cluster)
        return claims if names <= set(claims) else None

    return wait_until(named, within=60, what=f"the NodeClaims of {sorted(names)}")


def nodes(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in get_json(cluster, "nodes")["items"]}


def annotation(pod: dict[str, Any], key: str) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(key)
