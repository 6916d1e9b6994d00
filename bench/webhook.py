"""B3: admission latency of the placement webhook (`schedpolicy webhook`).

Under load: 100 pod creates per second while the controller converges B1's fleet (its
costs cleared first) in the same cluster. The webhook's p50/p99 come from its own
histogram (buckets down to 0.5 ms); the added create p99 from the apiserver's
`apiserver_request_duration_seconds`, against the same creates with no webhook registered,
while the controller converges the same fleet from scratch too.

Burst: five Deployments scaled from 0 to `burst_replicas` each at once. Reported: the
share of webhook calls in each bucket of the apiserver's
`apiserver_admission_webhook_admission_duration_seconds`, its fail-open count, and the
created pods that lack their `schedpolicy.io/hints` annotation. The same burst runs
once more against bench/null_webhook.py, which decides nothing, for what the machine
itself allows.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from prometheus_client.parser import text_string_to_metric_families

from bench import convergence, fleet, pprof, profiled
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.ports import free_port
from localcluster.webhook import LoopbackWebhook

NAMESPACE = "bench-webhook"
RATE = 100  # creates per second
WEBHOOK = "hints.schedpolicy.io"


def scrape(url: str, cluster: LocalCluster | None = None) -> str:
    """A /metrics page; the apiserver's with the cluster's admin credentials."""
    import urllib.request

    context = cluster.ssl_context() if cluster is not None else None
    with urllib.request.urlopen(url, context=context, timeout=10) as r:
        return str(r.read().decode())


def apiserver_metrics(cluster: LocalCluster) -> str:
    return scrape(f"{cluster.server}/metrics", cluster)


def histogram(text: str, family: str, match: dict[str, str] | None = None) -> dict[float, float]:
    """Cumulative bucket counts of one histogram, summed over series that match `match`."""
    buckets: dict[float, float] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name != family:
            continue
        for s in fam.samples:
            if s.name.endswith("_bucket") and all(
                s.labels.get(k) == v for k, v in (match or {}).items()
            ):
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
    return buckets


def own_histogram(port: int) -> dict[float, float]:
    text = scrape(f"http://127.0.0.1:{port}/metrics")
    return histogram(text, "schedpolicy_webhook_duration_seconds")


def counter(text: str, family: str, match: dict[str, str]) -> float:
    total = 0.0
    for fam in text_string_to_metric_families(text):
        if fam.name in (family, family.removesuffix("_total")):
            for s in fam.samples:
                if all(s.labels.get(k) == v for k, v in match.items()):
                    total += s.value
    return total


def bucket_shares(before: dict[float, float], after: dict[float, float]) -> dict[str, float]:
    """The share of observations in each bucket, from cumulative counts (le -> share)."""
    delta = sorted((le, after.get(le, 0.0) - before.get(le, 0.0)) for le in after)
    total = delta[-1][1] if delta else 0.0
    shares, below = {}, 0.0
    for le, count in delta:
        label = "+Inf" if le == float("inf") else f"{le * 1000:g} ms"
        shares[label] = round((count - below) / total, 4) if total else 0.0
        below = count
    return shares


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """Quantile of the observations between two scrapes, interpolated within buckets (ms)."""
    delta = sorted((le, after.get(le, 0.0) - before.get(le, 0.0)) for le in after)
    total = delta[-1][1] if delta else 0.0
    if total <= 0:
        return float("nan")
    rank = q * total
    lower_le, lower_count = 0.0, 0.0
    for le, count in delta:
        if count >= rank:
            if le == float("inf"):
                return lower_le * 1000
            span = count - lower_count
            fraction = (rank - lower_count) / span if span else 1.0
            return (lower_le + (le - lower_le) * fraction) * 1000
        lower_le, lower_count = le, count
    return lower_le * 1000


async def create_load(cluster: LocalCluster, seconds: int, prefix: str) -> float:
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


def run_b3(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    fleet.namespace(cluster, NAMESPACE)
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        objects=[
            {
                "apiVersion": "schedpolicy.io/v1alpha1",
                "kind": "SchedulingPolicy",
                "metadata": {"name": "bench-webhook"},
                "spec": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}
                    },
                    "placement": {
                        "capacityType": {"prefer": "spot", "weight": 20},
                        "avoidGPUNodes": True,
                    },
                },
            }
        ],
    )
    request = {"verb": "POST", "resource": "pods", "subresource": ""}
    hook_match = {"name": WEBHOOK, "operation": "CREATE", "type": "admit"}
    admission = "apiserver_admission_webhook_admission_duration_seconds"

    busy: dict[str, float] = {}

    sched: dict[str, dict[str, float]] = {}

    def loaded(
        prefix: str,
        own_port: int | None = None,
        profile: Path | None = None,
        pid: int | None = None,
    ) -> dict[str, dict[float, float]]:
        """The creates while the controller converges B1's fleet from scratch (when B1
        left one), so every run sees the same load: quantiles of create latency, of the
        webhook call as the apiserver saw it, and of its own histogram when it has one."""
        controller = converging_controller(cluster, scale)
        profiler = (
            pprof.ApiserverProfile(cluster, max(scale.webhook_seconds - 1, 1), profile)
            if profile
            else None
        )
        ticks = pprof.cpu_ticks()
        sched_before = pprof.sched_ns(pid) if pid else (0, 0)
        text = apiserver_metrics(cluster)
        before = {
            "create": histogram(text, "apiserver_request_duration_seconds", request),
            "hook": histogram(text, admission, hook_match),
            "own": own_histogram(own_port) if own_port else {},
        }
        asyncio.run(create_load(cluster, scale.webhook_seconds, prefix))
        busy[prefix] = pprof.busy_share(ticks, pprof.cpu_ticks())
        if pid:
            ran, waited = (a - b for a, b in zip(pprof.sched_ns(pid), sched_before, strict=True))
            calls = scale.webhook_seconds * RATE
            sched[prefix] = {
                "cpu_ms_per_call": round(ran / 1e6 / calls, 3),
                "runqueue_wait_ms_per_call": round(waited / 1e6 / calls, 3),
            }
        if profiler is not None:
            profiler.finish()
        text = apiserver_metrics(cluster)
        after = {
            "create": histogram(text, "apiserver_request_duration_seconds", request),
            "hook": histogram(text, admission, hook_match),
            "own": own_histogram(own_port) if own_port else {},
        }
        if controller is not None:
            controller.stop()
        return {k: {q: quantile(before[k], after[k], q) for q in (0.5, 0.99)} for k in before}

    def clear() -> None:
        cluster.kubectl(
            "delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--wait=false"
        )

    under_load = bool(fleet.replicas(cluster, convergence.NAMESPACE))
    # Baseline: no webhook registered.
    base = loaded("base")["create"]
    clear()

    # With the operator's webhook (the chart's configuration, pointed at loopback).
    webhook = LoopbackWebhook(cluster, cluster.workdir / "bench-webhook-pki", "bench-webhook")
    log = cluster.workdir / "logs" / "schedpolicy-webhook.log"
    operator = webhook.start(log, timeout=300)
    point_at(webhook)
    ours = loaded(
        "hooked",
        operator.metrics_port,
        out.parent / "profiles" / "b3-apiserver.txt",
        operator.proc.pid,
    )
    hooked, hook, own = ours["create"], ours["hook"], ours["own"]
    hinted = sum(
        1
        for p in fleet.pods(cluster, NAMESPACE, "app=load")
        if "schedpolicy.io/hints" in (p["metadata"].get("annotations") or {})
    )
    clear()
    burst = run_burst(cluster, scale, hook_match, "burst")

    # The same load and burst against a webhook that decides nothing: what the machine allows.
    null_port = free_port()
    null = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.null_webhook",
            str(null_port),
            str(webhook.cert),
            str(webhook.key),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        point_at(webhook, null_port)
        bare = loaded("null", pid=null.pid)
        clear()
        burst["null_webhook"] = run_burst(cluster, scale, hook_match, "null")
    finally:
        null.terminate()
        null.wait()
        point_at(webhook)
    operator.stop()
    # The same load once more under pyinstrument, kept apart: profiling slows the operator.
    profile = out.parent / "profiles" / "b3-webhook.txt"
    profile.parent.mkdir(exist_ok=True)
    operator = webhook.start(log, module=profiled.MODULE, env=profiled.env(profile), timeout=300)
    asyncio.run(create_load(cluster, scale.webhook_seconds, "profiled"))
    operator.stop()
    webhook.unregister()
    cluster.kubectl("delete", "spol", "bench-webhook")
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
    return {
        "name": "B3 webhook latency",
        "scale": scale.name,
        "creates": scale.webhook_seconds * RATE,
        "rate_per_second": RATE,
        "pods_hinted": hinted,
        "under_load": under_load,
        "machine_busy_share": busy,
        "webhook_scheduling": sched,
        "null_webhook": {
            "webhook_p50_ms": round(bare["hook"][0.5], 2),
            "webhook_p99_ms": round(bare["hook"][0.99], 2),
            "create_p99_ms_with": round(bare["create"][0.99], 2),
            "added_p99_ms": round(bare["create"][0.99] - base[0.99], 2),
        },
        "webhook_p50_ms": round(hook[0.5], 2),
        "webhook_p99_ms": round(hook[0.99], 2),
        "own_p50_ms": round(own[0.5], 3),
        "own_p99_ms": round(own[0.99], 3),
        "burst": burst,
        "create_p50_ms_without": round(base[0.5], 2),
        "create_p99_ms_without": round(base[0.99], 2),
        "create_p50_ms_with": round(hooked[0.5], 2),
        "create_p99_ms_with": round(hooked[0.99], 2),
        "added_p99_ms": round(hooked[0.99] - base[0.99], 2),
        "goal": "own p99 <= 10 ms under load, added create p99 <= 20 ms; burst >= 90%"
        " under 25 ms, 0 fail-opens, 0 pods without hints",
    }


def point_at(webhook: LoopbackWebhook, port: int | None = None) -> None:
    """(Re)register the webhook configuration with its URL on the webhook's loopback port
    (or on `port`)."""
    webhook.register(port=port)
    time.sleep(3)  # the apiserver picks up webhook configurations asynchronously


def converging_controller(cluster: LocalCluster, scale: Scale) -> OperatorProcess | None:
    """The controller converging B1's fleet from scratch (costs cleared), or None when
    there is no fleet (B3 run alone)."""
    if not fleet.replicas(cluster, convergence.NAMESPACE):
        return None
    convergence.clear_costs(cluster, scale.write_concurrency)
    return convergence.start_operator(cluster, scale, None)


def run_burst(
    cluster: LocalCluster, scale: Scale, hook_match: dict[str, str], prefix: str
) -> dict[str, Any]:
    """Five Deployments scaled from 0 to `burst_replicas` each at once."""
    family = "apiserver_admission_webhook_admission_duration_seconds"
    names = [f"{prefix}-{i}" for i in range(5)]
    selector = f"app in ({','.join(names)})"
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        objects=[fleet.deployment(n, NAMESPACE, 0, {"bench": "nowhere"}) for n in names],
    )
    fail_open = "apiserver_admission_webhook_fail_open_count"
    fail_open_match = {"name": WEBHOOK}
    text = apiserver_metrics(cluster)
    before = histogram(text, family, hook_match)
    fail_open_before = counter(text, fail_open, fail_open_match)
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
    text = apiserver_metrics(cluster)
    after = histogram(text, family, hook_match)
    fail_opens = counter(text, fail_open, fail_open_match) - fail_open_before
    pods = fleet.pods(cluster, NAMESPACE, selector)
    unhinted = sum(
        1 for p in pods if "schedpolicy.io/hints" not in (p["metadata"].get("annotations") or {})
    )
    shares = bucket_shares(before, after)
    under_25 = sum(v for k, v in shares.items() if k != "+Inf" and float(k.split()[0]) <= 25)
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
        "share_under_25ms": round(under_25, 4),
        "fail_opens": int(fail_opens),
        "pods_without_hints": unhinted,
    }
