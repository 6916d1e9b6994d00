"""Bad input leaves what is stored untouched, and is counted by reason."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from localcluster import ClusterError, LocalCluster
from localcluster.ports import free_port
from schedpolicy.core.wellknown import COST_ANNOTATION
from tests.e2e.conftest import SAMPLE, metric_sample
from tests.e2e.kubeobjects import deployment, ready_pods, wait_until
from tests.e2e.pools import Pool, apply, apply_namespace_policy, get_json, namespace_policy
from tests.e2e.reliability.conftest import Start


def counters(port: int) -> dict[tuple[str, str], float]:
    """(metric, reason) -> value, from the operator's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "reason" in s.labels:
                out[(s.name, s.labels["reason"])] = s.value
    return out


def ours(pod: dict[str, Any]) -> tuple[str | None, Any]:
    entry = [m for m in pod["metadata"].get("managedFields", []) if m["manager"] == "schedpolicy"]
    return (pod["metadata"].get("annotations") or {}).get(COST_ANNOTATION), entry


@pytest.fixture
def metrics_port() -> int:
    return free_port()


async def test_untrustworthy_samples_change_nothing(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
    metrics_port: int,
) -> None:
    """Samples that cannot be trusted (NaN, infinite, negative, future-dated, stale, for
    another pod, malformed, or from a scrape that hangs) leave every cost and its
    managedFields entry as they were, and the operator's /metrics counts each by reason."""
    pool.create(pool.node("bad"))
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    await apps.create_namespaced_deployment(
        namespace, deployment("app", 7, node_selector=pool.selector, labels={"src": "annotation"})
    )
    await apps.create_namespaced_deployment(
        namespace,
        deployment("scraped", 1, node_selector=pool.selector, labels={"src": "prometheus"}),
    )
    pods = await ready_pods(api, namespace, "app=app", 7)
    (scraped,) = await ready_pods(api, namespace, "app=scraped", 1)
    now = datetime.now(UTC)
    for p in pods:
        await core.patch_namespaced_pod(
            p.metadata.name,
            namespace,
            {"metadata": {"annotations": {SAMPLE: metric_sample(500, p.metadata.uid, now)}}},
        )

    # A real endpoint "on" the scraped pod's loopback IP, which will start to hang.
    hang = asyncio.Event()
    port = free_port()

    async def serve(_: web.Request) -> web.Response:
        if hang.is_set():
            await asyncio.sleep(30)
        return web.Response(text="conns 500\n")

    app = web.Application()
    app.router.add_get("/metrics", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, scraped.status.pod_ip, port).start()
    try:
        bands = [{"min": 0, "points": 0}, {"min": 100, "points": 900}]
        policies.extend([f"ann-{namespace}", f"prom-{namespace}"])
        apply(
            cluster,
            namespace_policy(
                f"ann-{namespace}",
                namespace,
                podSelector={"matchLabels": {"src": "annotation"}},
                deletionCost={
                    "minUpdateIntervalSeconds": 0,
                    "signals": [
                        {
                            "type": "Metric",
                            "metric": {
                                "annotation": {"key": SAMPLE},
                                "maxAgeSeconds": 600,
                                "bands": bands,
                            },
                        }
                    ],
                },
            ),
        )
        apply(
            cluster,
            namespace_policy(
                f"prom-{namespace}",
                namespace,
                podSelector={"matchLabels": {"src": "prometheus"}},
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
                                "maxAgeSeconds": 6,
                                "bands": bands,
                            },
                        }
                    ],
                },
            ),
        )
        start_operator(
            f"--metrics-port={metrics_port}", "--metrics-address=127.0.0.1", "--metrics-insecure"
        )

        def all_900() -> bool:
            items = get_json(cluster, "pods", "-n", namespace)["items"]
            return all(
                ours(p)[0] == "900"
                for p in items
                if p["metadata"]["labels"].get("app") in ("app", "scraped")
            )

        await asyncio.to_thread(wait_until, all_900, within=60, what="the first costs")
        before = {
            p["metadata"]["name"]: ours(p)
            for p in get_json(cluster, "pods", "-n", namespace)["items"]
        }

        bad: dict[str, Callable[[str], str]] = {
            "not-finite": lambda uid: metric_sample("NaN", uid, datetime.now(UTC)),
            "negative": lambda uid: metric_sample(-5, uid, datetime.now(UTC)),
            "future": lambda uid: metric_sample(5, uid, datetime.now(UTC) + timedelta(hours=2)),
            "stale": lambda uid: metric_sample(5, uid, datetime.now(UTC) - timedelta(hours=2)),
            "wrong-uid": lambda uid: metric_sample(5, "someone-else", datetime.now(UTC)),
            "malformed": lambda uid: "{oops",
        }
        for p, make in zip(pods, bad.values(), strict=False):
            await core.patch_namespaced_pod(
                p.metadata.name,
                namespace,
                {"metadata": {"annotations": {SAMPLE: make(p.metadata.uid)}}},
            )
        infinite = pods[6]
        await core.patch_namespaced_pod(
            infinite.metadata.name,
            namespace,
            {
                "metadata": {
                    "annotations": {
                        SAMPLE: metric_sample("Infinity", infinite.metadata.uid, datetime.now(UTC))
                    }
                }
            },
        )
        hang.set()
        await asyncio.sleep(8)  # several scrapes (every 2s) and reconcile rounds

        after = {
            p["metadata"]["name"]: ours(p)
            for p in get_json(cluster, "pods", "-n", namespace)["items"]
        }
        assert after == before, "a cost or its managedFields entry moved on an untrusted sample"
        seen = counters(metrics_port)
        for reason in (*bad, "timeout"):
            assert seen.get(("schedpolicy_metric_samples_rejected_total", reason), 0) > 0, reason
    finally:
        await runner.cleanup()


async def test_a_cost_set_by_someone_else_is_left_alone(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
    metrics_port: int,
) -> None:
    """A cost someone else set is left alone by a policy without takeOver: that pod keeps
    777 and gets no managedFields entry of ours, its neighbour gets the policy's cost, and
    schedpolicy_cost_skipped_total counts a foreign-cost skip."""
    pool.create(pool.node("foreign", labels={"karpenter.sh/capacity-type": "spot"}))
    await client.AppsV1Api(api).create_namespaced_deployment(
        namespace, deployment("app", 2, node_selector=pool.selector)
    )
    mine, theirs = await ready_pods(api, namespace, "app=app", 2)
    cluster.kubectl(
        "annotate", "pod", theirs.metadata.name, "-n", namespace, f"{COST_ANNOTATION}=777"
    )
    apply_namespace_policy(
        cluster,
        policies,
        f"foreign-{namespace}",
        namespace,
        deletionCost={"signals": [{"type": "CapacityType", "capacityType": {"spot": -100}}]},
    )
    start_operator(
        f"--metrics-port={metrics_port}", "--metrics-address=127.0.0.1", "--metrics-insecure"
    )

    def settled() -> dict[str, str | None] | None:
        costs = {
            p["metadata"]["name"]: ours(p)[0]
            for p in get_json(cluster, "pods", "-n", namespace)["items"]
        }
        return costs if costs.get(mine.metadata.name) == "-100" else None

    costs = await asyncio.to_thread(
        wait_until, settled, within=30, what="our cost on the other pod"
    )
    await asyncio.sleep(3)
    stored = get_json(cluster, "pod", theirs.metadata.name, "-n", namespace)
    assert ours(stored) == ("777", [])
    assert costs[theirs.metadata.name] == "777"
    assert counters(metrics_port).get(("schedpolicy_cost_skipped_total", "foreign-cost"), 0) > 0


async def test_gpu_labels_without_allocatable_gpus_get_nothing(
    cluster: LocalCluster,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
    metrics_port: int,
) -> None:
    """A node whose GPU Feature Discovery labels claim GPUs that its status.allocatable does
    not list gets no GPU label, annotation or write of ours, and
    schedpolicy_gpu_nodes_unlabelled counts it; a node with allocatable GPUs is labelled."""
    broken = pool.node(
        "broken",
        instance_type="g5.12xlarge",
        gpus="0",
        labels={"nvidia.com/gpu.product": "NVIDIA-A10G", "nvidia.com/gpu.memory": "23028"},
    )
    fine = pool.node("fine", instance_type="g5.12xlarge", gpus="4")
    pool.create(broken, fine)
    policies.append(f"nogpu-{pool.tag}")
    apply(
        cluster,
        {
            "apiVersion": "schedpolicy.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": f"nogpu-{pool.tag}"},
            "spec": {
                "priority": 700,
                "nodeLabels": {"gpu": {"nodeSelector": {"matchLabels": pool.selector}}},
            },
        },
    )
    start_operator(
        f"--metrics-port={metrics_port}", "--metrics-address=127.0.0.1", "--metrics-insecure"
    )
    await asyncio.to_thread(
        wait_until,
        lambda: (
            "schedpolicy.io/gpu-model" in get_json(cluster, "node", fine.name)["metadata"]["labels"]
        ),
        within=30,
        what="the real GPU node labelled",
    )
    meta = get_json(cluster, "node", broken.name)["metadata"]
    assert not [k for k in meta["labels"] if k.startswith("schedpolicy.io/gpu-")]
    assert "schedpolicy.io/owned-labels" not in meta.get("annotations", {})
    assert not [m for m in meta["managedFields"] if m["manager"] == "schedpolicy"]
    unlabelled = counters(metrics_port).get(
        ("schedpolicy_gpu_nodes_unlabelled", "no-allocatable-gpus"), 0
    )
    assert unlabelled >= 1


async def test_a_rejected_update_keeps_the_accepted_spec_working(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    """An update the apiserver rejects (min above max) changes nothing: the policy keeps its
    generation, its spec and Ready=True, and the pods keep their costs."""
    pool.create(pool.node("cel", labels={"karpenter.sh/capacity-type": "spot"}))
    await client.AppsV1Api(api).create_namespaced_deployment(
        namespace, deployment("app", 2, node_selector=pool.selector)
    )
    await ready_pods(api, namespace, "app=app", 2)
    name = f"cel-{namespace}"
    policies.append(name)
    good = namespace_policy(
        name,
        namespace,
        deletionCost={"signals": [{"type": "CapacityType", "capacityType": {"spot": -100}}]},
    )
    apply(cluster, good)
    start_operator()
    await asyncio.to_thread(
        wait_until,
        lambda: (
            {ours(p)[0] for p in get_json(cluster, "pods", "-n", namespace)["items"]} == {"-100"}
        ),
        within=30,
        what="costs",
    )
    before = get_json(cluster, "spol", name)
    pods_before = {
        p["metadata"]["name"]: ours(p) for p in get_json(cluster, "pods", "-n", namespace)["items"]
    }

    bad = namespace_policy(
        name,
        namespace,
        deletionCost={
            "min": 10,
            "max": -10,
            "signals": [{"type": "CapacityType", "capacityType": {"spot": -900}}],
        },
    )
    with pytest.raises(ClusterError, match=r"spec\.deletionCost\.min"):
        apply(cluster, bad)
    await asyncio.sleep(3)

    after = get_json(cluster, "spol", name)
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"] == before["spec"]
    assert {c["type"]: c["status"] for c in after["status"]["conditions"]}["Ready"] == "True"
    assert {
        p["metadata"]["name"]: ours(p) for p in get_json(cluster, "pods", "-n", namespace)["items"]
    } == pods_before
