"""Runs last (files are collected in name order): after everything the e2e suite did,
with the operator watching every Pod and Node, none of them carries kopf's marks."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.audit import events
from localcluster.chart import NAMESPACE as RELEASE_NAMESPACE
from localcluster.operator_process import OperatorProcess
from localcluster.write_checks import operator_attempts, unowned_writes

# Both lanes: whatever the compatibility lane ran must leave the same clean aftermath.
pytestmark = [pytest.mark.e2e, pytest.mark.compat]


async def test_no_pod_or_node_carries_kopf_annotations_or_finalizers(
    api: client.ApiClient, operator: OperatorProcess
) -> None:
    """After the whole suite, no pod or node carries a kopf annotation or finalizer."""
    core = client.CoreV1Api(api)
    objects = (await core.list_node()).items + (await core.list_pod_for_all_namespaces()).items
    assert objects, "nothing to check: the suite created no pods or nodes"
    marked = [
        (o.metadata.namespace, o.metadata.name, key)
        for o in objects
        for key in [*(o.metadata.annotations or {}), *(o.metadata.finalizers or [])]
        if "kopf" in key
    ]
    assert marked == []


def test_the_operator_wrote_only_what_it_may(cluster: LocalCluster) -> None:
    """From the audit log of the whole run: the operator's processes wrote pods (the cost
    annotations), nodes (labels of ours and one annotation), policy status, Events and its
    Lease, asked for token and access reviews (authenticated /metrics), kept the compiled
    MutatingAdmissionPolicies (named ours) and the webhook's match condition, and nothing else;
    every pod patch was guarded by the pod's UID. Only the processes' requests count:
    test_admission_guard sends forbidden writes with the same token through kubectl, on
    purpose, to see the apiserver refuse them."""
    attempts = operator_attempts(events(cluster.audit_log))
    assert attempts, "the operator wrote nothing in the whole run"
    assert any(200 <= e.code < 300 for e in attempts)
    assert unowned_writes(attempts, RELEASE_NAMESPACE) == []
