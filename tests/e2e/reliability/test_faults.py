"""Faults and races, each judged from what the apiserver stored, never from the operator's logs."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.chart import NAMESPACE as RELEASE_NAMESPACE
from localcluster.webhook import LoopbackWebhook
from schedpolicy.core.wellknown import COST_ANNOTATION
from tests.e2e.kubeobjects import PAUSE_IMAGE, deployment, eventually, ready_pods, wait_until
from tests.e2e.pools import Pool, apply, apply_namespace_policy, get_json, namespace_policy
from tests.e2e.reliability.conftest import Start, converged, snapshot_costs

CAPACITY = "karpenter.sh/capacity-type"
WARM = "example.com/cache-warm"
SIGNALS = [
    {"type": "CapacityType", "capacityType": {"spot": -300, "onDemand": 0}},
    {"type": "NodeConsolidation", "nodeConsolidation": {"points": 300}},
    {"type": "ZoneBalance"},
]


def fleet(pool: Pool, nodes: int, pods_per_node: str) -> None:
    zones = ("us-east-1a", "us-east-1b", "us-east-1c")
    pool.create(
        *(
            pool.node(
                f"r{i}",
                zone=zones[i % 3],
                pods=pods_per_node,
                cpu="16",
                labels={CAPACITY: "spot" if i % 2 else "on-demand"},
            )
            for i in range(nodes)
        )
    )


async def app_on_fleet(
    api: client.ApiClient, namespace: str, pool: Pool, nodes: int, pods_per_node: str, replicas: int
) -> None:
    """A fleet of fake nodes, and a Deployment `app` of `replicas` running on it."""
    fleet(pool, nodes, pods_per_node)
    await client.AppsV1Api(api).create_namespaced_deployment(
        namespace, deployment("app", replicas, node_selector=pool.selector, cpu="10m")
    )
    await ready_pods(api, namespace, "app=app", replicas)


def cost_policy(
    cluster: LocalCluster, policies: list[str], name: str, namespace: str, **cost: Any
) -> None:
    """Apply a deletion-cost policy over the namespace (removed after the test)."""
    apply_namespace_policy(
        cluster,
        policies,
        name,
        namespace,
        deletionCost={"minUpdateIntervalSeconds": 0, "signals": SIGNALS, **cost},
    )


def cost_writes(cluster: LocalCluster, namespace: str, since: datetime) -> list[Any]:
    return [
        e
        for e in writes_by(cluster.audit_log, since=since)
        if e.resource == "pods" and e.namespace == namespace
    ]


def costs_written(cluster: LocalCluster, namespace: str) -> int:
    return sum(v is not None for v in snapshot_costs(cluster, namespace)[1].values())


def assert_every_write_hit_its_own_pod(
    cluster: LocalCluster, namespace: str, since: datetime
) -> None:
    uids = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in get_json(cluster, "pods", "-n", namespace)["items"]
    }
    for event in cost_writes(cluster, namespace, since):
        if event.code != 200 or not isinstance(event.request, list):
            continue
        guard = [op for op in event.request if op.get("path") == "/metadata/uid"]
        assert guard, f"an unguarded patch to {event.name}"
        assert guard[0]["value"] == uids.get(event.name, guard[0]["value"]), (
            f"{event.name} got a cost for another pod"
        )


async def test_apiserver_restart_mid_reconcile(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    await app_on_fleet(api, namespace, pool, 10, "60", 500)
    started = datetime.now(UTC)
    cost_policy(cluster, policies, f"restart-{namespace}", namespace)
    operator = start_operator("--write-concurrency=4")
    await asyncio.to_thread(
        wait_until,
        lambda: costs_written(cluster, namespace) >= 50,
        within=60,
        what="the first costs",
    )

    cluster.stop_component("kube-apiserver")
    await asyncio.sleep(5)
    cluster.start_component("kube-apiserver")

    await asyncio.to_thread(
        wait_until,
        lambda: converged(cluster, namespace),
        within=180,
        what="every cost equal to the pure function's, after the restart",
    )
    assert operator.proc.poll() is None, "the operator had to be restarted"
    assert_every_write_hit_its_own_pod(cluster, namespace, started)


async def first_cost_seen(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    async with watch.Watch().stream(
        core.list_namespaced_pod, namespace, timeout_seconds=60
    ) as stream:
        async for event in stream:
            if COST_ANNOTATION in (event["object"].metadata.annotations or {}):
                return
    raise AssertionError("no cost was written within 60s")


async def test_operator_crash_then_a_new_instance_converges_and_rests(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    await app_on_fleet(api, namespace, pool, 6, "60", 300)
    cost_policy(cluster, policies, f"crash-{namespace}", namespace)
    first = start_operator("--write-concurrency=1")
    # Polling the stored costs is far slower than the operator writes them, so a watch freezes
    # the process (SIGSTOP) at its first stored cost; only then is it counted and killed.
    await first_cost_seen(api, namespace)
    os.kill(first.proc.pid, signal.SIGSTOP)
    written = costs_written(cluster, namespace)
    first.kill()  # SIGKILL
    assert 0 < written < 300, "the crash must fall mid-convergence"

    start_operator()
    await asyncio.to_thread(
        wait_until, lambda: converged(cluster, namespace), within=120, what="convergence"
    )
    quiet_from = datetime.now(UTC)
    await asyncio.sleep(10)
    assert cost_writes(cluster, namespace, quiet_from) == []


class LeaseRecorder:
    """Polls the operator's Lease and keeps every (time, holder) change: the Lease history."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.history: list[tuple[datetime, str | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            out = (
                self.cluster.kubectl(
                    "get",
                    "lease",
                    "schedpolicy",
                    "-n",
                    RELEASE_NAMESPACE,
                    "-o",
                    "jsonpath={.spec.holderIdentity}",
                    check=False,
                ).strip()
                or None
            )
            if not self.history or self.history[-1][1] != out:
                self.history.append((datetime.now(UTC), out))
            time.sleep(0.2)

    def __enter__(self) -> LeaseRecorder:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def test_leader_failover_never_two_writers(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    lease = [
        "--leader-elect",
        f"--leader-election-namespace={RELEASE_NAMESPACE}",
        "--lease-duration=6",
        "--renew-deadline=4",
        "--retry-period=1",
        "--verbose",
    ]
    await app_on_fleet(api, namespace, pool, 4, "60", 100)
    name = f"failover-{namespace}"
    cost_policy(cluster, policies, name, namespace, min=-100000)

    began = datetime.now(UTC)
    with LeaseRecorder(cluster) as lease_log:
        a = start_operator(*lease, wait=False)
        b = start_operator(*lease, wait=False)
        await asyncio.to_thread(
            wait_until, lambda: converged(cluster, namespace), within=120, what="convergence"
        )
        leader, follower = (a, b) if "leads (Lease" in a.output() else (b, a)
        assert "leads (Lease" in leader.output()
        assert "leads (Lease" not in follower.output()
        leader_id = leader.output().split(" leads (Lease")[0].rsplit(" ", 1)[-1]

        leader.kill()
        killed_at = datetime.now(UTC)
        # New costs for every pod, which only a leader can write.
        apply(
            cluster,
            namespace_policy(
                name,
                namespace,
                deletionCost={
                    # Wide bounds: no pod's cost may be clamped to the same value before and after.
                    "min": -100000,
                    "minUpdateIntervalSeconds": 0,
                    "signals": [
                        *SIGNALS,
                        {"type": "CapacityType", "capacityType": {"spot": -200, "onDemand": -200}},
                    ],
                },
            ),
        )
        await asyncio.to_thread(
            wait_until, lambda: converged(cluster, namespace), within=60, what="takeover"
        )

    holders = [(t, h) for t, h in lease_log.history if h]
    takeover = next(t for t, h in holders if h != leader_id and t > killed_at)
    assert (takeover - killed_at).total_seconds() <= 6 + 4, holders
    follower_id = follower.output().split(" leads (Lease")[0].rsplit(" ", 1)[-1]

    writes = [e for e in cost_writes(cluster, namespace, began) if e.code == 200]
    by_leader = [e.at for e in writes if leader_id in e.agent]
    by_follower = [e.at for e in writes if follower_id in e.agent]
    assert by_follower, "the new leader wrote nothing"
    assert not by_leader or max(by_leader) <= killed_at
    # The recorder polls every 0.2s, so it sees the takeover a little late.
    assert min(by_follower) >= takeover - timedelta(seconds=0.5)
    # managedFields agree: every pod's cost was last written after the takeover.
    for pod in get_json(cluster, "pods", "-n", namespace, "-l", "app=app")["items"]:
        (entry,) = [m for m in pod["metadata"]["managedFields"] if m["manager"] == "schedpolicy"]
        assert datetime.fromisoformat(entry["time"].replace("Z", "+00:00")) >= takeover.replace(
            microsecond=0
        )


async def test_uid_race_gives_the_new_pod_no_stale_cost(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    """A pod is replaced by another of the same name while the operator has a write for the
    old one pending (rate-limited). The controller manager is stopped so that the hand-made
    replacement, owned by the same ReplicaSet, is left alone."""
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


async def test_webhook_down_pods_are_created_and_costed_later(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
    tmp_path: Path,
) -> None:
    pool.create(pool.node("wh", labels={CAPACITY: "spot"}))
    webhook = LoopbackWebhook(cluster, tmp_path, f"down-{pool.tag}")
    apply_namespace_policy(
        cluster,
        policies,
        f"down-{namespace}",
        namespace,
        placement={"avoidGPUNodes": True},
        deletionCost={"signals": [{"type": "CapacityType", "capacityType": {"spot": -100}}]},
    )
    operator = start_operator()
    hook = webhook.start(tmp_path / "webhook.log")
    webhook.register()
    try:
        # The whole product down: the webhook and the controller.
        hook.kill()
        operator.kill()
        await client.AppsV1Api(api).create_namespaced_deployment(
            namespace, deployment("app", 3, node_selector=pool.selector)
        )
        pods = await ready_pods(api, namespace, "app=app", 3)
        assert {p.spec.scheduler_name for p in pods} == {"default-scheduler"}
        assert all("schedpolicy.io/hints" not in (p.metadata.annotations or {}) for p in pods)
        start_operator()
        await asyncio.to_thread(
            wait_until, lambda: converged(cluster, namespace), within=60, what="costs"
        )
        assert set(snapshot_costs(cluster, namespace)[1].values()) == {"-100"}
    finally:
        webhook.unregister()


def etcd_compact(cluster: LocalCluster) -> int:
    """Compact etcd up to its current revision, through etcd's own HTTP gateway."""
    url = f"http://127.0.0.1:{cluster.ports.etcd_client}/v3"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(f"{url}/{path}", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.load(resp))

    revision = int(
        post("kv/range", {"key": base64.b64encode(b"/").decode(), "limit": 1})["header"]["revision"]
    )
    post("kv/compaction", {"revision": revision, "physical": True})
    return revision


async def test_watch_expiry_relists_and_stays_correct(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    apps = client.AppsV1Api(api)
    await app_on_fleet(api, namespace, pool, 3, "40", 6)
    cost_policy(cluster, policies, f"expiry-{namespace}", namespace)
    operator = start_operator("--verbose")
    await asyncio.to_thread(
        wait_until, lambda: converged(cluster, namespace), within=60, what="convergence"
    )

    # Let the watched resource versions fall behind a compaction, then cut every watch.
    await apps.patch_namespaced_deployment_scale("app", namespace, {"spec": {"replicas": 9}})
    await ready_pods(api, namespace, "app=app", 9)
    etcd_compact(cluster)
    cluster.stop_component("kube-apiserver")
    cluster.start_component("kube-apiserver")
    await asyncio.to_thread(
        wait_until,
        lambda: (
            "pods: resourceVersion" in operator.output()
            and "expired; relisting" in operator.output()
        ),
        within=60,
        what="the 410 Gone and the relist",
    )
    await apps.patch_namespaced_deployment_scale("app", namespace, {"spec": {"replicas": 12}})
    await ready_pods(api, namespace, "app=app", 12)
    await asyncio.to_thread(
        wait_until, lambda: converged(cluster, namespace), within=90, what="convergence"
    )
    assert operator.proc.poll() is None


@pytest.fixture(autouse=True)
def _keep_the_control_plane_whole(cluster: LocalCluster) -> Iterator[None]:
    """Whatever a fault test does to the components, the next test finds all of them up."""
    yield
    for name in ("kube-apiserver", "kube-controller-manager"):
        if (cluster.workdir / f"stopped-{name}.json").exists():
            cluster.start_component(name)
