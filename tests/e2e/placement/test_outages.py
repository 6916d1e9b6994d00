"""Outages: with the webhook process down, pods are still created (the webhook fails open);
with our scheduler down, the policy and a metric say which pods wait for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from tests.e2e.kubeobjects import eventually, wait_until
from tests.e2e.placement.conftest import HINTS, SCHEDULER, CreatePod, bound, gpu_pod, settled
from tests.e2e.pools import Pool, apply_namespace_policy, get_json

pytestmark = pytest.mark.e2e


async def test_webhook_down_fails_open_and_a_dead_scheduler_is_reported(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    webhook_process: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """With the webhook process gone, pods are still created: on the default scheduler where
    the webhook hints, hinted all the same where the apiserver does; back, it hints again.
    With our scheduler stopped, its pods wait and the policy says which (Degraded,
    SchedulerNotScheduling), as schedpolicy_pending_pods does until the scheduler is back."""
    pool.create(pool.node("open", cpu="8"))
    apply_namespace_policy(
        cluster, policies, f"open-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    core = client.CoreV1Api(api)
    await settled(cluster, policies[-1], mode)

    # With the webhook process gone, creation still succeeds: on the default scheduler when
    # the webhook hints, and hinted all the same when the apiserver does.
    webhook_process.kill()
    try:
        unhinted = gpu_pod("unhinted", pool, gpus="0", labels={"app": "open"})
        created = await create_pod(namespace, unhinted)
        (pod,) = await bound(api, namespace, "app=open", 1)
        if mode == "policy":
            assert created.spec.scheduler_name == SCHEDULER
            assert HINTS in (pod.metadata.annotations or {})
        else:
            assert created.spec.scheduler_name == "default-scheduler"
            assert HINTS not in (pod.metadata.annotations or {})
    finally:
        webhook_process.restart()
        webhook_process.wait_for_log("webhook view synced")

    # Back, it hints again; the controller never stopped.
    again_body = gpu_pod("hinted-again", pool, gpus="0", labels={"app": "again"})
    again = await create_pod(namespace, again_body)
    assert again.spec.scheduler_name == SCHEDULER
    assert HINTS in (again.metadata.annotations or {})
    assert operator.proc.poll() is None
    # The restarted process counted and timed that answer on its own /metrics; on the
    # policy path the apiserver never called it.
    answered = webhook_process.metric("schedpolicy_webhook_requests_total", result="hinted") or 0
    if mode == "policy":
        assert answered == 0
    else:
        assert answered >= 1
        assert (webhook_process.metric("schedpolicy_webhook_duration_seconds_count") or 0) >= 1

    # With our scheduler stopped, hinted pods wait, and the policy says why.
    cluster.stop_component(SCHEDULER)
    try:
        await asyncio.sleep(1)
        await core.create_namespaced_pod(
            namespace, gpu_pod("stuck", pool, gpus="0", labels={"app": "stuck"})
        )

        def degraded() -> dict[str, Any] | None:
            conditions = (
                get_json(cluster, "spol", f"open-{namespace}")
                .get("status", {})
                .get("conditions", [])
            )
            found = {c["type"]: c for c in conditions}.get("Degraded", {})
            return found if found.get("reason") == "SchedulerNotScheduling" else None

        cond = await asyncio.to_thread(
            wait_until, degraded, within=40, what="Degraded=SchedulerNotScheduling"
        )
        assert f"{namespace}/stuck" in cond["message"]
        # The same fact for alerting: a gauge per scheduler name.
        assert (operator.metric("schedpolicy_pending_pods", scheduler=SCHEDULER) or 0) >= 1
    finally:
        cluster.start_component(SCHEDULER)
    await bound(api, namespace, "app=stuck", 1)
    await eventually(
        lambda: asyncio.to_thread(
            lambda: (operator.metric("schedpolicy_pending_pods", scheduler=SCHEDULER) or 0) == 0
        ),
        within=30,
        what="schedpolicy_pending_pods back to 0 once the scheduler is back",
    )
