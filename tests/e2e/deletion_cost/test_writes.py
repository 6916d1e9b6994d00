"""How deletion costs are written: one annotation added beside the others, a foreign cost
taken over and every cost given back as the policy says, nothing rewritten by a restart, and
never a cost for a pod that has been replaced under the same name.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.kube_errors import PreconditionFailed
from tests.e2e.conftest import CAPACITY, start, wait_for_costs
from tests.e2e.kubeobjects import PAUSE_IMAGE, deployment, eventually, ready_pods, wait_until
from tests.e2e.pools import Pool, apply_namespace_policy, get_json

pytestmark = pytest.mark.e2e
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
COST_FIELD = f"f:{COST_ANNOTATION}"


async def test_writing_a_cost_keeps_every_other_annotation(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """Writing a cost adds the one annotation: a pod whose only annotation was kubectl's
    last-applied one keeps it, next to its new cost."""
    # The operator keeps no copy of kubectl's last-applied annotation; a pod whose only
    # annotation is that one must still get a key added, not a whole new map.
    pool.create(pool.node("n0", labels={CAPACITY: "spot"}))
    doc = deployment("app", 2, node_selector=pool.selector)
    kept = {LAST_APPLIED: '{"kept": true}'}
    doc["spec"]["template"]["metadata"]["annotations"] = kept
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, doc)
    await ready_pods(api, namespace, "app=app", 2)
    apply_namespace_policy(
        cluster,
        policies,
        f"keep-{namespace}",
        namespace,
        deletionCost={"signals": [{"type": "CapacityType", "capacityType": {"spot": -100}}]},
    )

    pods = await wait_for_costs(api, kube, namespace, lambda p: "-100")

    for p in pods:
        assert p.metadata.annotations == {**kept, COST_ANNOTATION: "-100"}, p.metadata.name


async def test_take_over_then_give_back_when_unmatched_or_deleted(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """With takeOver, a cost someone else set becomes the policy's (its managedFields entry
    names schedpolicy); a pod that stops matching loses its cost while the others keep
    theirs, and deleting the policy removes every cost it wrote, the taken-over one too."""
    pool.create(pool.node("n0", labels={CAPACITY: "spot"}))
    doc = deployment("app", 3, node_selector=pool.selector, labels={"costed": "yes"})
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, doc)
    first, second, third = sorted(
        p.metadata.name for p in await ready_pods(api, namespace, "app=app", 3)
    )
    cluster.kubectl("annotate", "pod", first, "-n", namespace, f"{COST_ANNOTATION}=777")

    # takeOver: the cost someone else set is ours to keep right too.
    name = f"takeover-{namespace}"
    apply_namespace_policy(
        cluster,
        policies,
        name,
        namespace,
        podSelector={"matchLabels": {"costed": "yes"}},
        deletionCost={
            "takeOver": True,
            "signals": [{"type": "CapacityType", "capacityType": {"spot": -100}}],
        },
    )
    await wait_for_costs(api, kube, namespace, lambda p: "-100")
    taken = get_json(cluster, "pod", first, "-n", namespace)
    assert any(
        e["manager"] == "schedpolicy"
        and COST_FIELD in e.get("fieldsV1", {}).get("f:metadata", {}).get("f:annotations", {})
        for e in taken["metadata"]["managedFields"]
    )

    # A pod that stops matching loses the cost we wrote; the others keep theirs.
    cluster.kubectl("label", "pod", second, "-n", namespace, "costed=no", "--overwrite")

    def costs() -> dict[str, str | None]:
        pods = get_json(cluster, "pods", "-n", namespace, "-l", "app=app")["items"]
        return {
            p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(COST_ANNOTATION)
            for p in pods
        }

    wait_until(
        lambda: costs() == {first: "-100", second: None, third: "-100"},
        within=30,
        what="the cost removed from the pod that no longer matches",
    )

    # Deleting the policy removes every cost it wrote, the taken-over one included.
    cluster.kubectl("delete", "spol", name, "--wait=true")
    wait_until(
        lambda: costs() == {first: None, second: None, third: None},
        within=30,
        what="every cost removed after the policy is deleted",
    )


# ---- restart ------------------------------------------------------------------------------


async def test_restart_makes_no_writes(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """A restarted operator rewrites nothing: every pod keeps its resourceVersion, and the
    audit log shows no pod write since the restart."""
    pool.create(
        pool.node("r1", labels={CAPACITY: "spot"}), pool.node("r2", labels={CAPACITY: "on-demand"})
    )
    spot = pool.nodes[0].name
    await start(api, namespace, 6, pool)
    apply_namespace_policy(
        cluster,
        policies,
        f"restart-{namespace}",
        namespace,
        deletionCost={
            "signals": [
                {"type": "CapacityType", "capacityType": {"spot": -300}},
                {"type": "NodeConsolidation"},
            ]
        },
    )
    await wait_for_costs(
        api, kube, namespace, lambda p: "-300" if p.spec.node_name == spot else "0"
    )
    versions = {
        p.metadata.name: p.metadata.resource_version
        for p in (await client.CoreV1Api(api).list_namespaced_pod(namespace)).items
    }
    restarted_at = datetime.now(UTC)

    operator.restart()
    operator.wait_for_log("view synced")
    await asyncio.sleep(5)

    after = (await client.CoreV1Api(api).list_namespaced_pod(namespace)).items
    assert {p.metadata.name: p.metadata.resource_version for p in after} == versions
    pod_writes = [
        e for e in writes_by(cluster.audit_log, since=restarted_at) if e.resource == "pods"
    ]
    assert pod_writes == []


# ---- UID race -----------------------------------------------------------------------------


async def test_patch_for_a_replaced_pod_is_refused(
    cluster: LocalCluster, api: client.ApiClient, namespace: str
) -> None:
    """A patch meant for a pod that was deleted and created again under the same name is
    refused with 422, and the new pod carries no cost."""
    core = client.CoreV1Api(api)
    body = {
        "metadata": {"name": "reborn"},
        "spec": {"containers": [{"name": "c", "image": PAUSE_IMAGE}]},
    }
    old = await core.create_namespaced_pod(namespace, body)
    await core.delete_namespaced_pod("reborn", namespace, grace_period_seconds=0)

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod("reborn", namespace)
        except ApiException as err:
            return err.status == 404
        return False

    await eventually(gone, what="the old pod to be gone")
    new = await core.create_namespaced_pod(namespace, body)
    kube = await Kube.connect(Credentials(kubeconfig=str(cluster.operator_kubeconfig)), "e2e")
    try:
        # Exactly what the operator sends for the old pod (its UID, and the version it saw).
        with pytest.raises(PreconditionFailed) as err:
            await kube.set_pod_cost(
                namespace,
                "reborn",
                old.metadata.uid,
                "-999",
                has_annotations=False,
                resource_version=old.metadata.resource_version,
            )
    finally:
        await kube.close()

    assert err.value.status == 422
    stored = await core.read_namespaced_pod("reborn", namespace)
    assert stored.metadata.uid == new.metadata.uid != old.metadata.uid
    assert COST_ANNOTATION not in (stored.metadata.annotations or {})
