"""Fixtures for the reliability suite: operators it can start, kill and restart at will,
and the costs the pure core expects for a namespace, computed from a fresh snapshot."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.view import snapshot
from schedpolicy.view.deletion_cost import decisions

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
