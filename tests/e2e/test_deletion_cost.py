"""Deletion costs, proven by the real ReplicaSet controller.

Every scenario applies a policy, waits until the operator has written the costs
it should, scales the Deployment down, and checks which pods the controller
actually deleted. Placement is pinned with per-test fake nodes (pod capacity,
CPU, zones), so the expected victims follow from the policy alone.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess
from localcluster.topology import FakeNode
from schedpolicy.app import explain
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.kube_errors import PreconditionFailed
from tests.e2e.kubeobjects import PAUSE_IMAGE, deployment, eventually, ready_pods, wait_until
from tests.e2e.pools import Pool, apply_namespace_policy, get_json

pytestmark = pytest.mark.e2e
CAPACITY = "karpenter.sh/capacity-type"
WARM = "example.com/cache-warm"
SAMPLE = "schedpolicy.io/metric"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
COST_FIELD = f"f:{COST_ANNOTATION}"
GPU = "nvidia.com/gpu"


def costs_of(pods: list[client.V1Pod]) -> dict[str, str | None]:
    return {p.metadata.name: (p.metadata.annotations or {}).get(COST_ANNOTATION) for p in pods}


async def wait_for_costs(
    api: client.ApiClient,
    kube: Kube,
    namespace: str,
    expected: Callable[[client.V1Pod], str],
    selector: str = "app=app",
    within: float = 60,
) -> list[client.V1Pod]:
    """Until every pod carries exactly the cost `expected` says it should."""
    core = client.CoreV1Api(api)

    async def probe() -> list[client.V1Pod] | None:
        pods = (await core.list_namespaced_pod(namespace, label_selector=selector)).items
        pods = [p for p in pods if p.metadata.deletion_timestamp is None]
        ok = pods and all(costs_of([p])[p.metadata.name] == expected(p) for p in pods)
        return pods if ok else None

    pods = await eventually(probe, within=within, what="the expected costs on every pod")
    await assert_explained(kube, pods)
    return pods


async def assert_explained(kube: Kube, pods: list[client.V1Pod]) -> None:
    """`schedpolicy explain pod` must account for exactly the cost that is stored."""
    for pod in pods:
        ref = f"{pod.metadata.namespace}/{pod.metadata.name}"
        out = await explain.explain_pod(kube, ref)
        stored = costs_of([pod])[pod.metadata.name]
        assert (out["stored"]["value"], out["stored"]["ours"]) == (stored, True), ref
        assert str(out["cost"]["final"]) == stored, (ref, out["cost"]["explanation"])
        assert out["write"]["pending"] is False, (ref, out["write"])


async def scale_down(
    api: client.ApiClient, namespace: str, before: list[client.V1Pod], replicas: int
) -> tuple[list[client.V1Pod], list[client.V1Pod]]:
    """Scale the Deployment; return (survivors, deleted) as the controller decided."""
    apps = client.AppsV1Api(api)
    await apps.patch_namespaced_deployment_scale("app", namespace, {"spec": {"replicas": replicas}})
    survivors = await ready_pods(api, namespace, "app=app", replicas)
    kept = {p.metadata.name for p in survivors}
    return survivors, [p for p in before if p.metadata.name not in kept]


async def start(
    api: client.ApiClient, namespace: str, replicas: int, pool: Pool, **kw: Any
) -> list[client.V1Pod]:
    doc = deployment("app", replicas, node_selector=pool.selector, **kw)
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, doc)
    return await ready_pods(api, namespace, "app=app", replicas)


async def test_writing_a_cost_keeps_every_other_annotation(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
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


# ---- (a) spot first -----------------------------------------------------------------------


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


# ---- (b) consolidation --------------------------------------------------------------------


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

    apply_namespace_policy(
        cluster,
        policies,
        f"gpu-fill-{namespace}",
        namespace,
        deletionCost={
            "bucket": 100,
            "signals": [
                {
                    "type": "NodeConsolidation",
                    "nodeConsolidation": {"points": 800, "resources": [GPU]},
                }
            ],
        },
    )
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


# ---- (c) zones ----------------------------------------------------------------------------


async def test_crowded_zone_loses_replicas(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
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


# ---- (d) warm -----------------------------------------------------------------------------


async def test_warm_pods_survive(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """The warm pods are the newest ones: without costs the controller would delete
    them first (newer and more recently ready), so only the costs can save them."""
    pool.create(pool.node("cache"))
    old = await start(api, namespace, 2, pool)
    await asyncio.sleep(8)  # so that the two generations fall in different log-scale age buckets
    await client.AppsV1Api(api).patch_namespaced_deployment_scale(
        "app", namespace, {"spec": {"replicas": 4}}
    )
    pods = await ready_pods(api, namespace, "app=app", 4)
    warm = {p.metadata.name for p in pods} - {p.metadata.name for p in old}
    core = client.CoreV1Api(api)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name in warm:
        await core.patch_namespaced_pod_status(
            name,
            namespace,
            {
                "status": {
                    "conditions": [{"type": WARM, "status": "True", "lastTransitionTime": now}]
                }
            },
        )

    apply_namespace_policy(
        cluster,
        policies,
        f"warm-{namespace}",
        namespace,
        deletionCost={
            "signals": [
                {"type": "PodCondition", "podCondition": {"conditionType": WARM, "points": 800}}
            ]
        },
    )
    before = await wait_for_costs(
        api, kube, namespace, lambda p: "800" if p.metadata.name in warm else "0"
    )
    survivors, _ = await scale_down(api, namespace, before, 2)

    assert {p.metadata.name for p in survivors} == warm


# ---- (e) busy, and samples that must not be trusted ---------------------------------------


def _sample(value: Any, uid: str, at: datetime) -> str:
    return json.dumps(
        {"value": value, "observedAt": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "podUID": uid}
    )


def _our_entry(pod: client.V1Pod) -> tuple[str, Any] | None:
    for entry in pod.metadata.managed_fields or []:
        if entry.manager == "schedpolicy":
            return (str(entry.time), entry.fields_v1)
    return None


async def test_busy_pods_survive_and_bad_samples_change_nothing(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    pool.create(pool.node("ws"))
    pods = await start(api, namespace, 4, pool)
    core = client.CoreV1Api(api)
    busy = {p.metadata.name for p in pods[:2]}
    uid = {p.metadata.name: p.metadata.uid for p in pods}
    now = datetime.now(UTC)
    for p in pods:
        value = 500 if p.metadata.name in busy else 1
        await core.patch_namespaced_pod(
            p.metadata.name,
            namespace,
            {"metadata": {"annotations": {SAMPLE: _sample(value, p.metadata.uid, now)}}},
        )

    apply_namespace_policy(
        cluster,
        policies,
        f"busy-{namespace}",
        namespace,
        deletionCost={
            "minUpdateIntervalSeconds": 0,
            "signals": [
                {
                    "type": "Metric",
                    "metric": {
                        "annotation": {"key": SAMPLE},
                        "maxAgeSeconds": 600,
                        "bands": [{"min": 0, "points": 0}, {"min": 100, "points": 900}],
                    },
                }
            ],
        },
    )
    pods = await wait_for_costs(
        api, kube, namespace, lambda p: "900" if p.metadata.name in busy else "0"
    )

    # Untrustworthy samples on a busy pod and an idle pod, each of which would move the
    # cost if it were trusted (the idle pod's claims 700 connections).
    target_busy, target_idle = sorted(busy)[0], sorted(set(uid) - busy)[0]
    stamp = {p.metadata.name: _our_entry(p) for p in pods}
    bad_samples: list[tuple[str, Callable[[str, int], str]]] = [
        ("stale", lambda u, v: _sample(v, u, now - timedelta(hours=1))),
        ("future", lambda u, v: _sample(v, u, datetime.now(UTC) + timedelta(hours=1))),
        ("not-finite", lambda u, v: _sample("NaN", u, datetime.now(UTC))),
        ("negative", lambda u, v: _sample(-v, u, datetime.now(UTC))),
        ("wrong-uid", lambda u, v: _sample(v, "another-pod-uid", datetime.now(UTC))),
        ("malformed", lambda u, v: "{not json"),
    ]

    def rejected(reason: str) -> float:
        found = operator.metric("schedpolicy_metric_samples_rejected_total", reason=reason)
        return found or 0.0

    for reason, bad in bad_samples:
        before = rejected(reason)
        for name, value in ((target_busy, 5), (target_idle, 700)):
            annotation = {SAMPLE: bad(uid[name], value)}
            await core.patch_namespaced_pod(
                name, namespace, {"metadata": {"annotations": annotation}}
            )
        # One sample at a time, each seen and refused by the operator before the next.
        await eventually(
            lambda: asyncio.to_thread(lambda: rejected(reason) >= before + 2),  # noqa: B023
            within=30,
            what=f"the operator to refuse both {reason} samples",
        )
    after = {
        p.metadata.name: p
        for p in (await core.list_namespaced_pod(namespace, label_selector="app=app")).items
    }
    for name in (target_busy, target_idle):
        assert costs_of([after[name]])[name] == ("900" if name in busy else "0")
        assert _our_entry(after[name]) == stamp[name], (
            "schedpolicy wrote to a pod with an untrusted sample"
        )

    survivors, _ = await scale_down(api, namespace, list(after.values()), 2)
    assert {p.metadata.name for p in survivors} == busy


# ---- (f) restart --------------------------------------------------------------------------


async def test_restart_makes_no_writes(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
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


# ---- (g) UID race -------------------------------------------------------------------------


async def test_patch_for_a_replaced_pod_is_refused(
    cluster: LocalCluster, api: client.ApiClient, namespace: str
) -> None:
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


# ---- Metric from a real Prometheus endpoint "on" the pod ----------------------------------


async def test_metric_scraped_from_pod_endpoint(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """KWOK gives pods loopback IPs (127.66.0.0/16), so a test server can answer on a pod's
    own IP. A hanging endpoint must leave the cost as it is (bounded by the timeout)."""
    pool.create(pool.node("metrics"))
    pods = await start(api, namespace, 2, pool)
    busy, idle = pods
    port = 19090
    answers = {busy.status.pod_ip: "conns 75\n", idle.status.pod_ip: "conns 0\n"}
    hang = asyncio.Event()

    async def metrics(request: web.Request) -> web.Response:
        if hang.is_set():
            await asyncio.sleep(30)
        return web.Response(text=answers[request.host.split(":")[0]])

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    for ip in answers:
        await web.TCPSite(runner, ip, port).start()
    try:
        apply_namespace_policy(
            cluster,
            policies,
            f"scrape-{namespace}",
            namespace,
            deletionCost={
                "minUpdateIntervalSeconds": 0,
                "signals": [
                    {
                        "type": "Metric",
                        "metric": {
                            "prometheus": {
                                "port": port,
                                "metric": "conns",
                                "timeoutSeconds": 0.5,
                            },
                            "bands": [{"min": 0, "points": 0}, {"min": 50, "points": 600}],
                        },
                    }
                ],
            },
        )
        await wait_for_costs(
            api, kube, namespace, lambda p: "600" if p.metadata.name == busy.metadata.name else "0"
        )

        # The idle pod turns busy but its endpoint hangs: no sample, no change.
        answers[idle.status.pod_ip] = "conns 99\n"
        hang.set()
        await asyncio.sleep(4)
        now = {
            p.metadata.name: p
            for p in (await client.CoreV1Api(api).list_namespaced_pod(namespace)).items
        }
        assert costs_of(list(now.values())) == {busy.metadata.name: "600", idle.metadata.name: "0"}

        hang.clear()
        await wait_for_costs(api, kube, namespace, lambda p: "600")
    finally:
        await runner.cleanup()
