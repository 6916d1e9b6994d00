"""Deletion costs by what each pod says of itself, proven by the real ReplicaSet controller:
warm pods (a pod condition) and busy pods (a metric, from an annotation or the pod's own
Prometheus endpoint) survive a scale-down, and a sample that cannot be trusted changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from schedpolicy.shell.kube import Kube
from tests.e2e.conftest import (
    SAMPLE,
    WARM,
    costs_of,
    metric_sample,
    scale_down,
    start,
    wait_for_costs,
)
from tests.e2e.kubeobjects import eventually, ready_pods
from tests.e2e.pools import Pool, apply_namespace_policy

pytestmark = pytest.mark.e2e


# ---- warm ---------------------------------------------------------------------------------


async def test_warm_pods_survive(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """A PodCondition policy on a cache-warm condition: a scale-down keeps the warm pods.
    They are the newest ones: without costs the controller would delete them first (newer
    and more recently ready), so only the costs can save them."""
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


# ---- busy, and samples that must not be trusted -------------------------------------------


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
    """A Metric policy on a sample the pod's annotation carries: a scale-down keeps the busy
    pods, and a stale, future-dated, NaN, negative, malformed or other pod's sample changes
    no cost, each counted in schedpolicy_metric_samples_rejected_total by reason."""
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
            {"metadata": {"annotations": {SAMPLE: metric_sample(value, p.metadata.uid, now)}}},
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
        ("stale", lambda u, v: metric_sample(v, u, now - timedelta(hours=1))),
        ("future", lambda u, v: metric_sample(v, u, datetime.now(UTC) + timedelta(hours=1))),
        ("not-finite", lambda u, v: metric_sample("NaN", u, datetime.now(UTC))),
        ("negative", lambda u, v: metric_sample(-v, u, datetime.now(UTC))),
        ("wrong-uid", lambda u, v: metric_sample(v, "another-pod-uid", datetime.now(UTC))),
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
    """A Metric policy that scrapes each pod's Prometheus endpoint: the busy pod gets the
    higher cost, a hanging endpoint leaves the cost as it is (bounded by the timeout), and
    once it answers again the cost follows. KWOK gives pods loopback IPs (127.66.0.0/16),
    so a test server can answer on a pod's own IP."""
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
