"""The local control plane is real: upstream apiserver, scheduler, ReplicaSet
controller and KWOK, each proven by what it does rather than by its name."""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
import uuid

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from localcluster import LocalCluster, binaries
from localcluster.topology import FAKE_NODE_ANNOTATION, FakeNode
from tests.e2e.kubeobjects import PAUSE_IMAGE, deployment, eventually, ready_pods, scheduled_by

pytestmark = pytest.mark.e2e

COST = "controller.kubernetes.io/pod-deletion-cost"


@pytest.mark.compat
def test_apiserver_is_the_pinned_release_backed_by_etcd(cluster: LocalCluster) -> None:
    """v1.37.2 in the main suite and v1.35.4 in the compatibility lane: the server and the
    kubectl the harness runs are exactly the release the lane's tools module pins."""
    ctx: ssl.SSLContext = cluster.ssl_context()
    with urllib.request.urlopen(f"{cluster.server}/version", context=ctx) as resp:
        version = json.load(resp)
    assert version["gitVersion"] == binaries.kube_version()
    assert binaries.kube_version() == ("v1.35.4" if binaries.lane() else "v1.37.2")
    reported = json.loads(cluster.kubectl("version", "-o", "json"))
    assert reported["clientVersion"]["gitVersion"] == binaries.kube_version()
    assert reported["serverVersion"]["gitVersion"] == binaries.kube_version()
    with urllib.request.urlopen(f"{cluster.server}/readyz?verbose", context=ctx) as resp:
        checks = resp.read().decode()
    assert "[+]etcd ok" in checks


async def test_deployment_is_scheduled_and_run(api: client.ApiClient, namespace: str) -> None:
    """A Deployment's pods are bound by the default scheduler, as their Scheduled Events
    say, onto KWOK's fake nodes, and run with pod IPs."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    await apps.create_namespaced_deployment(namespace, deployment("web", 4))

    pods = await ready_pods(api, namespace, "app=web", 4)

    nodes = {n.metadata.name: n for n in (await core.list_node()).items}
    for pod in pods:
        node = nodes[pod.spec.node_name]
        assert node.metadata.annotations.get(FAKE_NODE_ANNOTATION) == "fake"
        assert pod.status.pod_ip, "KWOK assigns pod IPs when it starts a pod"

    reporters = await scheduled_by(api, namespace, [p.metadata.name for p in pods])
    assert set(reporters.values()) == {"default-scheduler"}


@pytest.mark.compat
async def test_replicaset_controller_deletes_lowest_cost_first(
    cluster: LocalCluster, api: client.ApiClient, namespace: str
) -> None:
    """Three replicas share node `crowded`, one sits alone on `single` (max 1 pod).

    Without deletion costs the ReplicaSet controller removes doubled-up pods
    first, so the lone pod on `single` would always survive a scale-down to 2.
    With costs, the two highest-cost pods survive, and we give the highest to
    two pods on `crowded`: the assertion only holds if costs were honoured.
    """
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    tag = uuid.uuid4().hex[:6]
    pool = {"schedpolicy.io/e2e-pool": tag}
    single = FakeNode(
        name=f"single-{tag}",
        zone="us-east-1a",
        region="us-east-1",
        instance_type="m5.xlarge",
        capacity={"cpu": "4", "memory": "16Gi", "pods": "1"},
        allocatable={"cpu": "4", "memory": "16Gi", "pods": "1"},
        labels=pool,
    )
    crowded = FakeNode(
        name=f"crowded-{tag}",
        zone="us-east-1a",
        region="us-east-1",
        instance_type="m5.xlarge",
        capacity={"cpu": "4", "memory": "16Gi", "pods": "20"},
        allocatable={"cpu": "4", "memory": "16Gi", "pods": "20"},
        labels=pool,
    )
    try:
        # One replica first, while `single` is the only node in the pool ...
        cluster.create_nodes([single])
        await apps.create_namespaced_deployment(
            namespace, deployment("ranked", 1, node_selector=pool)
        )
        (lone,) = await ready_pods(api, namespace, "app=ranked", 1)
        assert lone.spec.node_name == single.name
        # ... then three more, which can only fit on `crowded`.
        cluster.create_nodes([crowded])
        await apps.patch_namespaced_deployment_scale("ranked", namespace, {"spec": {"replicas": 4}})
        pods = await ready_pods(api, namespace, "app=ranked", 4)
        doubled = sorted(p.metadata.name for p in pods if p.spec.node_name == crowded.name)
        assert len(doubled) == 3

        costs = {doubled[0]: 1000, doubled[1]: 900, doubled[2]: -50, lone.metadata.name: -500}
        for name, cost in costs.items():
            await core.patch_namespaced_pod(
                name, namespace, {"metadata": {"annotations": {COST: str(cost)}}}
            )
        # The ReplicaSet controller ranks pods from its informer cache, which learns of the
        # annotations through its watch; nothing observable says when, so allow it a moment.
        await asyncio.sleep(1)

        await apps.patch_namespaced_deployment_scale("ranked", namespace, {"spec": {"replicas": 2}})
        survivors = await ready_pods(api, namespace, "app=ranked", 2)

        assert {p.metadata.name for p in survivors} == {doubled[0], doubled[1]}
    finally:
        # Empty the nodes before removing them: KWOK only finalizes pods on nodes it manages.
        await apps.patch_namespaced_deployment_scale("ranked", namespace, {"spec": {"replicas": 0}})
        await eventually(
            lambda: _no_pods(core, namespace, "app=ranked"), what="the ranked pods to be gone"
        )
        for node in (single, crowded):
            await core.delete_node(node.name)


async def _no_pods(core: client.CoreV1Api, namespace: str, selector: str) -> bool:
    return not (await core.list_namespaced_pod(namespace, label_selector=selector)).items


async def test_json_patch_with_wrong_uid_is_rejected(api: client.ApiClient, namespace: str) -> None:
    """A JSON patch whose UID test names another pod is refused with 422 and changes
    nothing; the same patch with the pod's own UID adds the cost."""
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(
        namespace,
        {
            "metadata": {
                "name": "target",
                "labels": {"app": "target"},
                "annotations": {"keep": "me"},
            },
            "spec": {"containers": [{"name": "app", "image": PAUSE_IMAGE}]},
        },
    )
    (before,) = await ready_pods(api, namespace, "app=target", 1)  # KWOK is done with it

    def cost_patch(uid: str) -> list[dict[str, str]]:
        return [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {
                "op": "add",
                "path": f"/metadata/annotations/{COST.replace('/', '~1')}",
                "value": "42",
            },
        ]

    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod("target", namespace, cost_patch(str(uuid.uuid4())))

    assert err.value.status == 422
    after = await core.read_namespaced_pod("target", namespace)
    assert after.metadata.resource_version == before.metadata.resource_version
    assert after.metadata.annotations == {"keep": "me"}

    # The same patch with the right UID applies, so the 422 came from the UID test alone.
    patched = await core.patch_namespaced_pod("target", namespace, cost_patch(before.metadata.uid))
    assert patched.metadata.annotations == {"keep": "me", COST: "42"}


def test_number_like_label_values_reach_the_apiserver_as_strings(cluster: LocalCluster) -> None:
    """Label values that look like numbers (1234e5, 0x1f) reach the apiserver as the strings
    they are."""
    # Regression: pools tag their nodes with random hex, and a tag such as `1234e5` went
    # through YAML unquoted and was refused by kubectl as a number.
    tag = "1234e5"
    name = f"numberlike-{uuid.uuid4().hex[:6]}"
    node = FakeNode(
        name=name,
        zone="us-east-1a",
        region="us-east-1",
        instance_type="m5.large",
        capacity={"cpu": "2", "pods": "10"},
        allocatable={"cpu": "2", "pods": "10"},
        labels={"pool": tag, "count": "0x1f", "flag": "yes"},
    )
    try:
        cluster.create_nodes([node])
        stored = json.loads(cluster.kubectl("get", "node", name, "-o", "json"))
        labels = stored["metadata"]["labels"]
        assert (labels["pool"], labels["count"], labels["flag"]) == (tag, "0x1f", "yes")
    finally:
        cluster.kubectl("delete", "node", name, "--ignore-not-found")
