"""The product's own processes failing, judged from what the apiserver stored, never from the
operator's logs: a controller killed mid-convergence, a leader killed, and the webhook and the
controller both down while pods are created."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes_asyncio import client, watch

from localcluster import LocalCluster
from localcluster.chart import NAMESPACE as RELEASE_NAMESPACE
from localcluster.webhook import LoopbackWebhook
from schedpolicy.core.wellknown import COST_ANNOTATION
from tests.e2e.conftest import CAPACITY
from tests.e2e.kubeobjects import deployment, ready_pods, wait_until
from tests.e2e.pools import Pool, apply, apply_namespace_policy, get_json, namespace_policy
from tests.e2e.reliability.conftest import (
    SIGNALS,
    Start,
    app_on_fleet,
    converged,
    cost_policy,
    cost_writes,
    costs_written,
    restart_stopped_components,
    snapshot_costs,
)


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
    """A controller killed in the middle of writing 300 costs: a new one brings every cost
    to what the policy gives, and then writes nothing more."""
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
    """Two controllers, one leading: when the leader is killed, the other takes the Lease
    within the lease duration plus the renew deadline, and no cost is written by the old
    leader after it died or by the new one before it took over."""
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


async def test_webhook_down_pods_are_created_and_costed_later(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
    tmp_path: Path,
) -> None:
    """With the webhook and the controller both down, a Deployment's pods are still created
    and run, unhinted on the default scheduler; once the controller is back they get their
    costs."""
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


@pytest.fixture(autouse=True)
def _keep_the_control_plane_whole(cluster: LocalCluster) -> Iterator[None]:
    """Whatever a fault test does to the components, the next test finds all of them up."""
    yield
    restart_stopped_components(cluster)
