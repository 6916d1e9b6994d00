"""Fixtures for the reliability suite: operators it can start, kill and restart at will,
the costs the pure core expects for a namespace, computed from a fresh snapshot, and the fleet,
policy and audit-log reading that the fault and race tests share."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.view import snapshot
from schedpolicy.view.deletion_cost import decisions
from tests.e2e.conftest import CAPACITY
from tests.e2e.kubeobjects import deployment, ready_pods
from tests.e2e.pools import Pool, apply_namespace_policy

Start = Callable[..., OperatorProcess]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def start_operator(cluster: LocalCluster, crd: str) -> Iterator[Start]:
    """Start operator processes (as the chart's ServiceAccount); all are stopped afterwards."""
    started: list[OperatorProcess] = []

    def start(*args: str, wait: bool = True) -> OperatorProcess:
        # One log per process: two replicas writing one file would read each other's lines.
        log = cluster.workdir / "logs" / f"schedpolicy-operator-r{len(started)}.log"
        proc = OperatorProcess(cluster.operator_kubeconfig, log, "--metrics-port=0", *args)
        started.append(proc)
        if wait:
            proc.wait_for_log("view synced", timeout=60)
        return proc

    yield start
    for proc in started:
        proc.stop()


def snapshot_costs(
    cluster: LocalCluster, namespace: str
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """(expected, stored) cost per pod name, expected by the pure core on a fresh snapshot."""

    def items(*args: str) -> list[dict[str, Any]]:
        return list(json.loads(cluster.kubectl("get", *args, "-o", "json"))["items"])

    pods = items("pods", "-n", namespace)
    view = snapshot.build_view(
        policies=items("schedulingpolicies"),
        nodes=items("nodes"),
        namespaces=items("namespaces"),
        pods=pods,
    )
    expected = {
        view.pods[uid].name: (None if final is None else str(final))
        for uid, final in decisions.expected_costs(view).items()
    }
    stored = {
        p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(COST_ANNOTATION)
        for p in pods
    }
    return expected, stored


def converged(cluster: LocalCluster, namespace: str) -> dict[str, str | None] | None:
    expected, stored = snapshot_costs(cluster, namespace)
    return stored if stored and expected == stored else None


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


def restart_stopped_components(cluster: LocalCluster) -> None:
    """Start again whichever control-plane component a fault test left stopped."""
    for name in ("kube-apiserver", "kube-controller-manager"):
        if (cluster.workdir / f"stopped-{name}.json").exists():
            cluster.start_component(name)
