"""Fixtures for tests against the real local control plane, and the helpers that tests of
more than one module share.

The control plane comes up once per session. If $KUBECONFIG points at the
kubeconfig of a running local cluster (from `make cluster-up`), that cluster is
reused and left running; otherwise a fresh one is started under
.cluster/pytest/ and stopped at the end. Each test gets its own namespace.

Below the fixtures: deletion costs (waiting for them, scaling down), GPU node labels
(nodes, policies, what a node carries), and the chart as helm renders it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client, config

from localcluster import LocalCluster, binaries, chart
from localcluster.binaries import REPO
from localcluster.operator_process import OperatorProcess, running
from localcluster.topology import FakeNode
from schedpolicy.app import explain
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from tests.e2e.kubeobjects import deployment, eventually, ready_pods
from tests.e2e.pools import Pool, apply_namespace_policy, get_json

# The compatibility lane's cluster has a directory of its own, so a lane never reuses the
# other's cluster.
PYTEST_WORKDIR = REPO / ".cluster" / (f"pytest-{binaries.lane()}" if binaries.lane() else "pytest")


def _reusable(kubeconfig: str | None) -> LocalCluster | None:
    if not kubeconfig:
        return None
    workdir = Path(kubeconfig).resolve().parent
    if not (workdir / "state.json").exists():
        return None
    cluster = LocalCluster(workdir)
    return cluster if cluster.healthy() else None


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    reused = _reusable(os.environ.get("KUBECONFIG"))
    if reused is not None:
        yield reused
        return
    fresh = LocalCluster(PYTEST_WORKDIR)
    fresh.up()
    try:
        yield fresh
    finally:
        fresh.down()


@pytest.fixture(scope="session")
async def api(cluster: LocalCluster) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(cluster.kubeconfig), client_configuration=cfg, persist_config=False
    )
    async with client.ApiClient(configuration=cfg) as api_client:
        yield api_client


@pytest.fixture
async def kube(cluster: LocalCluster) -> AsyncIterator[Kube]:
    """The operator's own client, with admin credentials, for read-side helpers like explain."""
    made = await Kube.connect(Credentials(kubeconfig=str(cluster.kubeconfig)), "e2e")
    yield made
    await made.close()


@pytest.fixture
async def namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    core = client.CoreV1Api(api)
    # Parametrized tests carry `[param]` in their names, which a namespace name may not.
    short = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower().replace("_", "-"))
    short = short[:40].strip("-")
    name = f"t-{short}-{uuid.uuid4().hex[:5]}"
    await core.create_namespace(
        {"metadata": {"name": name, "labels": {"schedpolicy.io/e2e": "true"}}}
    )
    # Pods are refused until the serviceaccount controller has made `default`.
    for _ in range(100):
        accounts = await core.list_namespaced_service_account(name)
        if any(sa.metadata.name == "default" for sa in accounts.items):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"serviceaccount {name}/default was never created")
    yield name
    await core.delete_namespace(name)


@pytest.fixture(scope="session")
def crd(cluster: LocalCluster) -> str:
    """The SchedulingPolicy CRD from crds/, installed and Established."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    name = "schedulingpolicies.schedpolicy.io"
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    # Discovery lags a moment behind Established; kubectl needs it to resolve the kind.
    for _ in range(50):
        if "schedulingpolicies" in cluster.kubectl("api-resources", "--api-group=schedpolicy.io"):
            break
        time.sleep(0.2)
    return name


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, crd: str) -> Iterator[OperatorProcess]:
    """An operator process from this checkout, one per test module, as its own user."""
    with running(cluster, "--verbose") as proc:
        yield proc


@pytest.fixture
def policies(cluster: LocalCluster, crd: str) -> Iterator[list[str]]:
    """Names appended here are SchedulingPolicies the test made; they are deleted after it."""
    created: list[str] = []
    yield created
    for name in created:
        cluster.kubectl("delete", "schedulingpolicy", name, "--ignore-not-found", "--wait=false")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    if exitstatus not in (0, 5):
        for workdir in (PYTEST_WORKDIR, REPO / ".cluster" / "local"):
            if (workdir / "logs").exists():
                terminalreporter.write_line(
                    f"control-plane logs (one per process): {workdir / 'logs'}"
                )


@pytest.fixture
async def pool(cluster: LocalCluster, namespace: str) -> AsyncIterator[Pool]:
    """Fake nodes for one test, tagged with its own label; deleted after it."""
    made = Pool(cluster, namespace)
    yield made
    await asyncio.to_thread(made.cleanup)


# ---- deletion costs -------------------------------------------------------------------------

CAPACITY = "karpenter.sh/capacity-type"
WARM = "example.com/cache-warm"
SAMPLE = "schedpolicy.io/metric"
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
    """A Deployment `app` of `replicas` on the pool's nodes, once every pod runs and is ready."""
    doc = deployment("app", replicas, node_selector=pool.selector, **kw)
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, doc)
    return await ready_pods(api, namespace, "app=app", replicas)


def apply_gpu_fill_policy(
    cluster: LocalCluster, policies: list[str], name: str, namespace: str, **fill: Any
) -> None:
    """A policy whose one signal is GPU fill: NodeConsolidation by nvidia.com/gpu, 800 points
    for a full node, in buckets of 100; `fill` adds to the signal (deviceClasses, say)."""
    apply_namespace_policy(
        cluster,
        policies,
        name,
        namespace,
        deletionCost={
            "bucket": 100,
            "signals": [
                {
                    "type": "NodeConsolidation",
                    "nodeConsolidation": {"points": 800, "resources": [GPU], **fill},
                }
            ],
        },
    )


def metric_sample(value: Any, uid: str, at: datetime) -> str:
    """A Metric signal's sample, as a pod's annotation carries it."""
    return json.dumps(
        {"value": value, "observedAt": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "podUID": uid}
    )


# ---- GPU node labels ------------------------------------------------------------------------

MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"
OWNED = "schedpolicy.io/owned-labels"
PRODUCT, GFD_MEMORY = "nvidia.com/gpu.product", "nvidia.com/gpu.memory"
SOURCE = "schedpolicy.io/e2e-gpu-source"
REFUSALS = "schedpolicy_gpu_label_refusals_total"


def gpu_node(pool: Pool, name: str, itype: str, gpus: str, source: str, **labels: str) -> FakeNode:
    return pool.node(
        name,
        instance_type=itype,
        gpus=gpus,
        cpu="96",
        pods="100",
        labels={SOURCE: source, **labels},
    )


def label_policy(name: str, pool: Pool, source: str, sources: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "priority": 500,
            "nodeLabels": {
                "gpu": {
                    "sources": sources,
                    "nodeSelector": {"matchLabels": {**pool.selector, SOURCE: source}},
                }
            },
        },
    }


def node_state(cluster: LocalCluster, name: str) -> dict[str, Any]:
    node = get_json(cluster, "node", name)
    meta = node["metadata"]
    ours = [
        {k: v for k, v in e.items() if k in ("manager", "time", "fieldsV1", "operation")}
        for e in meta.get("managedFields", [])
        if e["manager"] == "schedpolicy"
    ]
    return {
        "labels": {k: v for k, v in meta["labels"].items() if k.startswith("schedpolicy.io/gpu")},
        "owned": meta.get("annotations", {}).get(OWNED),
        "managed": ours,
    }


def node_events(cluster: LocalCluster, node: str, reason: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={node},reason={reason}"
    items: list[dict[str, Any]] = get_json(
        cluster, "events", "-n", "default", "--field-selector", selector
    )["items"]
    return items


# ---- the chart, as helm renders it ----------------------------------------------------------

CHART = binaries.REPO / "chart"
ALL_ON = CHART / "ci" / "all-on-values.yaml"
# The release the chart's own tests install: not the harness's (localcluster.chart).
RELEASE, NAMESPACE = "sp-e2e", "schedpolicy-e2e"
OPERATOR = f"{RELEASE}-schedpolicy"
SINGLETON = "schedpolicy"  # the fixed name of the cluster-scoped objects, whatever the release


def helm(*args: str, check: bool = True) -> str:
    proc = subprocess.run(
        [str(binaries.path("helm")), *args], capture_output=True, text=True, timeout=300
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout


def render(*values: Path, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    extra = [a for v in values for a in ("-f", str(v))]
    out = helm(
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        namespace,
        "--kube-version",
        chart.kube_version(),
        *chart.capability_flags(chart.kube_version()),
        *extra,
    )
    return [d for d in yaml.safe_load_all(out) if d]
