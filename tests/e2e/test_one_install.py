"""One install per cluster, at run time: a controller that bypassed Helm (the chart's manifests
applied by hand in another namespace, as a leftover of an old install would be) writes
nothing while an older install's controller is live, and the policies say so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from localcluster import LocalCluster, chart
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess
from localcluster.ports import free_port
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import Pool, apply, get_json

pytestmark = pytest.mark.e2e
SECOND = "schedpolicy-second"
SECOND_USER = f"system:serviceaccount:{SECOND}:schedpolicy"
MODEL = "schedpolicy.io/gpu-model"


def lease_args(namespace: str) -> list[str]:
    return [
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--lease-duration=6",
        "--renew-deadline=4",
        "--retry-period=1",
        f"--metrics-port={free_port()}",
        "--metrics-address=127.0.0.1",
        "--metrics-insecure",
    ]


@pytest.fixture
def first(cluster: LocalCluster, crd: str) -> Iterator[OperatorProcess]:
    """The installed controller, leader-elected in the release namespace."""
    log = cluster.workdir / "logs" / "schedpolicy-first.log"
    proc = OperatorProcess(cluster.operator_kubeconfig, log, *lease_args(chart.NAMESPACE))
    try:
        proc.wait_for_log("leads (Lease", timeout=60)
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def second_identity(cluster: LocalCluster) -> Iterator[Any]:
    """The chart's operator RBAC rendered for another namespace and applied by hand, its
    ClusterRoleBinding under an older chart's name (the fixed one is the first install's)."""
    cluster.kubectl("delete", "namespace", SECOND, "--ignore-not-found", "--wait=true")
    cluster.kubectl("create", "namespace", SECOND)
    docs = [
        d
        for d in chart.render("templates/operator/rbac.yaml", namespace=SECOND)
        if d["kind"] != "ClusterRole"
    ]
    for doc in docs:
        if doc["kind"] == "ClusterRoleBinding":
            doc["metadata"]["name"] = SECOND
    cluster.kubectl("apply", "-f", "-", objects=docs)
    try:
        yield cluster.service_account_kubeconfig("schedpolicy", SECOND, namespace=SECOND)
    finally:
        cluster.kubectl("delete", "clusterrolebinding", SECOND, "--ignore-not-found")
        cluster.kubectl("delete", "namespace", SECOND, "--ignore-not-found", "--wait=false")


def degraded(cluster: LocalCluster, policy: str) -> dict[str, Any]:
    status = get_json(cluster, "spol", policy).get("status", {})
    conditions: dict[str, dict[str, Any]] = {c["type"]: c for c in status.get("conditions", [])}
    return conditions.get("Degraded", {})


def gpu_policy(name: str, pool: Pool) -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "priority": 500,
            "nodeLabels": {
                "gpu": {"sources": ["InstanceType"], "nodeSelector": {"matchLabels": pool.selector}}
            },
        },
    }


def labelled(cluster: LocalCluster, node: str) -> bool:
    return MODEL in get_json(cluster, "node", node)["metadata"]["labels"]


async def test_a_second_controller_writes_nothing_and_the_policies_say_so(
    cluster: LocalCluster,
    pool: Pool,
    policies: list[str],
    first: OperatorProcess,
    second_identity: Any,
) -> None:
    """A second controller, its RBAC applied by hand in another namespace, writes nothing
    but its Lease while the installed one is live: the policy says Degraded
    (AnotherInstance) with a Warning Event, the installed controller keeps labelling new
    nodes, and once the second stops the policy is healthy again."""
    name = f"gpus-{pool.tag}"
    policies.append(name)
    (before,) = pool.create(pool.node("before", instance_type="g5.xlarge", gpus="1"))
    apply(cluster, gpu_policy(name, pool))
    wait_until(lambda: labelled(cluster, before.name), within=60, what="the first install labels")

    started = datetime.now(UTC)
    log = cluster.workdir / "logs" / "schedpolicy-second.log"
    second = OperatorProcess(second_identity, log, *lease_args(SECOND))
    try:
        second.wait_for_log("leads (Lease", timeout=60)
        second.wait_for_log("writes nothing while it runs", timeout=30)
        condition = wait_until(
            lambda: (c := degraded(cluster, name)).get("reason") == "AnotherInstance" and c,
            within=30,
            what="Degraded=AnotherInstance on the policy",
        )
        assert condition["status"] == "True"
        assert f"namespace {SECOND}" in condition["message"]

        # Work only a writer does: the first install labels a new node, the second nothing.
        (after,) = pool.create(pool.node("after", instance_type="g5.xlarge", gpus="1"))
        wait_until(lambda: labelled(cluster, after.name), within=60, what="the new node labelled")
        (entry,) = [
            m
            for m in get_json(cluster, "node", after.name)["metadata"]["managedFields"]
            if m["manager"] == "schedpolicy"
        ]
        events = get_json(
            cluster,
            "events",
            "-n",
            "default",
            "--field-selector",
            f"involvedObject.name={name},reason=AnotherInstance",
        )["items"]
        assert [e["type"] for e in events][:1] == ["Warning"]
    finally:
        second.stop()
    # Its own Lease is all the second controller ever wrote.
    writes = [
        (e.verb, e.resource, e.namespace, e.name)
        for e in writes_by(cluster.audit_log, SECOND_USER, since=started)
        if not (e.resource == "leases" and e.namespace == SECOND)
    ]
    assert writes == []
    assert entry["operation"] == "Update"
    assert json.dumps(entry).count("gpu-model") == 1

    # Once its Lease expires, the policy is healthy again.
    wait_until(
        lambda: degraded(cluster, name).get("reason") != "AnotherInstance",
        within=40,
        what="Degraded cleared after the second controller stopped",
    )
    assert "writes nothing" not in first.output()
