"""B3: admission latency of the placement webhook at 100 pod creates per second.

Both figures come from the apiserver's own histograms: the webhook's
`apiserver_admission_webhook_admission_duration_seconds`, and, for the baseline (the same
load with the webhook configuration removed) and the end-to-end view,
`apiserver_request_duration_seconds` for pod creates.
"""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from prometheus_client.parser import text_string_to_metric_families

from bench import fleet
from bench.scale import Scale
from localcluster import LocalCluster, chart
from localcluster.controlplane import free_port
from localcluster.operator_process import OperatorProcess
from localcluster.pki import Authority

NAMESPACE = "bench-webhook"
RATE = 100  # creates per second
WEBHOOK = "hints.schedpolicy.io"


def histogram(cluster: LocalCluster, family: str, match: dict[str, str]) -> dict[float, float]:
    """Cumulative bucket counts of one histogram, summed over series that match `match`."""
    import urllib.request

    with urllib.request.urlopen(
        f"{cluster.server}/metrics", context=cluster.ssl_context(), timeout=10
    ) as r:
        text = r.read().decode()
    buckets: dict[float, float] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name != family:
            continue
        for s in fam.samples:
            if s.name.endswith("_bucket") and all(s.labels.get(k) == v for k, v in match.items()):
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
    return buckets


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

    # Baseline: no webhook registered.
    before = histogram(cluster, "apiserver_request_duration_seconds", request)
    asyncio.run(create_load(cluster, scale.webhook_seconds, "base"))
    after = histogram(cluster, "apiserver_request_duration_seconds", request)
    base = {q: quantile(before, after, q) for q in (0.5, 0.99)}
    cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--wait=false")

    # With the operator's webhook (the chart's configuration, pointed at loopback).
    ca = Authority(cluster.workdir / "bench-webhook-pki")
    pair = ca.issue("webhook", common_name="webhook", hosts=("127.0.0.1",))
    port = free_port()

    def start(env: dict[str, str] | None = None) -> OperatorProcess:
        operator = OperatorProcess(
            cluster.operator_kubeconfig,
            cluster.workdir / "logs" / "schedpolicy-operator.log",
            "--metrics-port=0",
            f"--webhook-port={port}",
            "--webhook-address=127.0.0.1",
            f"--webhook-cert={pair.cert}",
            f"--webhook-key={pair.key}",
            env=env,
        )
        operator.wait_for_log("view synced", timeout=300)
        return operator

    operator = start()
    (config,) = [
        d
        for d in chart.render("templates/webhook.yaml")
        if d["kind"] == "MutatingWebhookConfiguration"
    ]
    config["metadata"]["name"] = "bench-webhook"
    for hook in config["webhooks"]:
        hook["clientConfig"] = {
            "url": f"https://127.0.0.1:{port}/hints",
            "caBundle": base64.b64encode(ca.cert_path.read_bytes()).decode(),
        }
    cluster.kubectl("apply", "-f", "-", objects=[config])
    time.sleep(3)  # the apiserver picks up webhook configurations asynchronously
    hook_match = {"name": WEBHOOK, "operation": "CREATE", "type": "admit"}
    before_req = histogram(cluster, "apiserver_request_duration_seconds", request)
    before_hook = histogram(
        cluster, "apiserver_admission_webhook_admission_duration_seconds", hook_match
    )
    asyncio.run(create_load(cluster, scale.webhook_seconds, "hooked"))
    after_req = histogram(cluster, "apiserver_request_duration_seconds", request)
    after_hook = histogram(
        cluster, "apiserver_admission_webhook_admission_duration_seconds", hook_match
    )
    hooked = {q: quantile(before_req, after_req, q) for q in (0.5, 0.99)}
    hook = {q: quantile(before_hook, after_hook, q) for q in (0.5, 0.99)}
    hinted = sum(
        1
        for p in fleet.pods(cluster, NAMESPACE, "app=load")
        if "schedpolicy.io/hints" in (p["metadata"].get("annotations") or {})
    )
    operator.stop()
    # The same load once more under pyinstrument, kept apart: profiling slows the operator.
    profile = out.parent / "profiles" / "b3-operator.txt"
    profile.parent.mkdir(exist_ok=True)
    operator = start({"SCHEDPOLICY_PROFILE": str(profile)})
    asyncio.run(create_load(cluster, scale.webhook_seconds, "profiled"))
    operator.stop()
    cluster.kubectl("delete", "mutatingwebhookconfiguration", "bench-webhook")
    cluster.kubectl("delete", "spol", "bench-webhook")
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
    return {
        "name": "B3 webhook latency",
        "scale": scale.name,
        "creates": scale.webhook_seconds * RATE,
        "rate_per_second": RATE,
        "pods_hinted": hinted,
        "webhook_p50_ms": round(hook[0.5], 2),
        "webhook_p99_ms": round(hook[0.99], 2),
        "create_p50_ms_without": round(base[0.5], 2),
        "create_p99_ms_without": round(base[0.99], 2),
        "create_p50_ms_with": round(hooked[0.5], 2),
        "create_p99_ms_with": round(hooked[0.99], 2),
        "added_p99_ms": round(hooked[0.99] - base[0.99], 2),
        "goal": "webhook p99 <= 20 ms added",
    }
