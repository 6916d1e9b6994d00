"""B3's load and burst: pod creates at a steady rate while the controller converges B1's
fleet, and five Deployments scaled from 0 at once; what each lane measures of them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from bench import fleet
from bench.admission import pprof
from bench.admission.create_latency import AuditCursor, quantile
from bench.admission.metrics import (
    ADMISSION,
    CREATE,
    FAIL_OPEN,
    HOOK_MATCH,
    REQUESTS,
    WEBHOOK,
    apiserver_metrics,
    bucket_quantile,
    bucket_shares,
    counter,
    histogram,
    histograms,
    under,
)
from bench.convergence import costs
from bench.lanes import Figures
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess, controller

NAMESPACE = "bench-webhook"
RATE = 100  # creates per second
HINTS = "schedpolicy.io/hints"


def bench_policy() -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "bench-webhook"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
            "placement": {
                "capacityType": {"prefer": "spot", "weight": 20},
                "avoidGPUNodes": True,
            },
        },
    }


async def create_load(
    cluster: LocalCluster, seconds: int, prefix: str, scheduler: str | None = None
) -> float:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    api = client.ApiClient(configuration=cfg)
    core = client.CoreV1Api(api)
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {"app": "load"}},
        "spec": {
            "nodeSelector": {
                "bench": "nowhere"
            },  # stays Pending: the load is admission, not scheduling
            "containers": [{"name": "c", "image": fleet.PAUSE}],
            **({"schedulerName": scheduler} if scheduler else {}),
        },
    }
    started = time.perf_counter()
    tasks = []
    for i in range(seconds * RATE):
        doc = {**body, "metadata": {**body["metadata"], "name": f"{prefix}-{i:05d}"}}
        tasks.append(
            asyncio.create_task(core.create_namespaced_pod(NAMESPACE, doc, _preload_content=False))
        )
        # Open loop: a steady 100/s, whatever the latency.
        await asyncio.sleep(max(0.0, started + (i + 1) / RATE - time.perf_counter()))
    await asyncio.gather(*tasks, return_exceptions=True)
    elapsed = time.perf_counter() - started
    await api.close()
    return elapsed


def loaded(
    cluster: LocalCluster,
    scale: Scale,
    prefix: str,
    own_port: int | None = None,
    profile: Path | None = None,
    pid: int | None = None,
    controller_args: tuple[str, ...] = (),
) -> Figures:
    """The creates while the controller converges B1's fleet from scratch (when B1 left
    one), so every lane sees the same load: quantiles of create latency, of the webhook
    call as the apiserver saw it, and of its own histogram when it has one; how busy the
    machine was, and how the process `pid` (a webhook) ran and waited per call."""
    converging = converging_controller(cluster, scale, *controller_args)
    profiler = (
        pprof.ApiserverProfile(cluster, max(scale.webhook_seconds - 1, 1), profile)
        if profile
        else None
    )
    ticks = pprof.cpu_ticks()
    sched_before = pprof.sched_ns(pid) if pid else (0, 0)
    before = histograms(cluster, own_port)
    cursor = AuditCursor.now(cluster.audit_log)
    asyncio.run(create_load(cluster, scale.webhook_seconds, prefix))
    busy = pprof.busy_share(ticks, pprof.cpu_ticks())
    scheduling = None
    if pid:
        ran, waited = (a - b for a, b in zip(pprof.sched_ns(pid), sched_before, strict=True))
        calls = scale.webhook_seconds * RATE
        scheduling = {
            "cpu_ms_per_call": round(ran / 1e6 / calls, 3),
            "runqueue_wait_ms_per_call": round(waited / 1e6 / calls, 3),
        }
    if profiler is not None:
        profiler.finish()
    after = histograms(cluster, own_port)
    if converging is not None:
        converging.stop()
    out = {k: {q: bucket_quantile(before[k], after[k], q) for q in (0.5, 0.99)} for k in before}
    # Creates one by one, not by the apiserver's coarse buckets.
    time.sleep(1)  # the last creates' audit events
    taken = cursor.creates(NAMESPACE)
    out["create"] = {q: quantile(taken, q) for q in (0.5, 0.99)}
    return {"quantiles": out, "busy_share": busy, "scheduling": scheduling}


def hinted(cluster: LocalCluster) -> int:
    """How many of the load's pods carry their hints."""
    return sum(
        1
        for p in fleet.pods(cluster, NAMESPACE, "app=load")
        if HINTS in (p["metadata"].get("annotations") or {})
    )


def clear_load(cluster: LocalCluster) -> None:
    """Delete the load's pods and wait until they are gone: deletions still under way
    would weigh on the next lane's creates."""
    cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--wait=false")
    fleet.wait_for(
        lambda: not fleet.pods(cluster, NAMESPACE, "app=load"),
        "the load's pods gone",
        within=600,
        every=2,
    )
    time.sleep(3)


def converging_controller(
    cluster: LocalCluster, scale: Scale, *extra: str
) -> OperatorProcess | None:
    """The controller converging B1's fleet from scratch (costs cleared), or None when
    there is no fleet (B3 run alone)."""
    if not fleet.replicas(cluster, costs.NAMESPACE):
        return None
    costs.clear_costs(cluster, scale.write_concurrency)
    return controller(cluster, f"--write-concurrency={scale.write_concurrency}", *extra)


def _scrape_burst(cluster: LocalCluster) -> tuple[dict[float, float], dict[float, float], float]:
    """(webhook calls, creates, fail-opens) so far, by the apiserver's metrics."""
    text = apiserver_metrics(cluster)
    return (
        histogram(text, ADMISSION, HOOK_MATCH),
        histogram(text, REQUESTS, CREATE),
        counter(text, FAIL_OPEN, {"name": WEBHOOK}),
    )


def run_burst(
    cluster: LocalCluster, scale: Scale, prefix: str, scheduler: str | None = None
) -> dict[str, Any]:
    """Five Deployments scaled from 0 to `burst_replicas` each at once."""
    names = [f"{prefix}-{i}" for i in range(5)]
    selector = f"app in ({','.join(names)})"
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        objects=[
            fleet.deployment(n, NAMESPACE, 0, {"bench": "nowhere"}, scheduler=scheduler)
            for n in names
        ],
    )
    before, creates_before, fail_open_before = _scrape_burst(cluster)
    started = time.monotonic()
    for n in names:
        cluster.kubectl(
            "scale",
            "deployment",
            n,
            "-n",
            NAMESPACE,
            f"--replicas={scale.burst_replicas}",
            "--timeout=0s",
        )
    want = 5 * scale.burst_replicas
    fleet.wait_for(
        lambda: fleet.replicas(cluster, NAMESPACE, "replicas") >= want,
        f"{want} burst pods created",
        within=900,
        every=2,
    )
    took = time.monotonic() - started
    time.sleep(2)
    after, creates_after, fail_open_after = _scrape_burst(cluster)
    pods = fleet.pods(cluster, NAMESPACE, selector)
    unhinted = sum(1 for p in pods if HINTS not in (p["metadata"].get("annotations") or {}))
    shares = bucket_shares(before, after)
    create_shares = bucket_shares(creates_before, creates_after)
    cluster.kubectl("delete", "deployments", *names, "-n", NAMESPACE, "--wait=false")
    fleet.wait_for(
        lambda: not fleet.pods(cluster, NAMESPACE, selector), "the burst pods gone", within=900
    )
    return {
        "deployments": 5,
        "replicas_each": scale.burst_replicas,
        "pods_created": len(pods),
        "seconds_to_create": round(took, 1),
        "bucket_shares": shares,
        "share_under_25ms": round(under(shares, 25), 4),
        # Every create as the apiserver timed it, with or without a webhook call in it.
        "create_bucket_shares": create_shares,
        "create_share_under_25ms": round(under(create_shares, 25), 4),
        "fail_opens": int(fail_open_after - fail_open_before),
        "pods_without_hints": unhinted,
    }
