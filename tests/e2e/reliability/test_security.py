"""Least privilege, and the webhook's own namespace check."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.chart import NAMESPACE as RELEASE_NAMESPACE
from localcluster.webhook import LoopbackWebhook
from tests.e2e.kubeobjects import PAUSE_IMAGE
from tests.e2e.pools import apply, namespace_policy
from tests.e2e.reliability.conftest import Start

ACCOUNT = f"system:serviceaccount:{RELEASE_NAMESPACE}:schedpolicy"


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("patch", "pods", True),
        ("patch", "nodes", True),
        ("patch", "schedulingpolicies.schedpolicy.io --subresource=status", True),
        ("create", "events", True),
        ("delete", "pods", False),
        ("delete", "nodes", False),
        ("get", "secrets", False),
        ("list", "secrets", False),
        ("patch", "deployments.apps", False),
        ("create", "pods", False),
        ("update", "schedulingpolicies.schedpolicy.io", False),
        ("delete", "schedulingpolicies.schedpolicy.io", False),
        ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io", False),
    ],
)
def test_operator_service_account_matrix(
    cluster: LocalCluster, crd: str, verb: str, resource: str, allowed: bool
) -> None:
    """As `kubectl auth can-i` answers for the chart's ServiceAccount, which the operator
    runs as in every e2e test: it may patch pods, nodes and policy status and create
    Events, and may do nothing else in the matrix."""
    answer = cluster.kubectl(
        "auth", "can-i", verb, *resource.split(), "-A", f"--as={ACCOUNT}", check=False
    ).strip()
    assert (answer == "yes") is allowed


async def test_webhook_never_changes_pods_in_excluded_namespaces(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    start_operator: Start,
    policies: list[str],
    tmp_path: Path,
) -> None:
    """The webhook configuration is stripped of its namespace exclusions on purpose: the
    operator must still refuse to touch pods in the namespaces it is told to exclude."""
    core = client.CoreV1Api(api)
    excluded = f"{namespace}-x"
    await core.create_namespace({"metadata": {"name": excluded}})
    webhook = LoopbackWebhook(cluster, tmp_path, f"excl-{namespace}"[:60])
    name = f"excl-{namespace}"
    policies.append(name)
    spol = namespace_policy(name, namespace, placement={"avoidGPUNodes": True})
    spol["spec"]["namespaceSelector"] = {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": [namespace, excluded],
            }
        ]
    }
    apply(cluster, spol)
    start_operator()
    hook = webhook.start(tmp_path / "webhook.log", f"--exclude-namespace={excluded}")
    webhook.register(every_namespace=True)
    try:
        await asyncio.sleep(1)
        body = {
            "metadata": {"name": "probe"},
            "spec": {"containers": [{"name": "c", "image": PAUSE_IMAGE}]},
        }
        untouched = await core.create_namespaced_pod(excluded, body)
        hinted = await core.create_namespaced_pod(namespace, body)
    finally:
        webhook.unregister()
        hook.stop()
        await core.delete_namespace(excluded)
    assert hinted.spec.scheduler_name == "schedpolicy-scheduler"  # the webhook works...
    assert untouched.spec.scheduler_name == "default-scheduler"  # ...and leaves excluded pods be
    assert untouched.spec.affinity is None
    assert "schedpolicy.io/hints" not in (untouched.metadata.annotations or {})
