"""Runs last (files are collected in name order): after everything the e2e suite did,
with the operator watching every Pod and Node, none of them carries kopf's marks."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.chart import NAMESPACE as RELEASE_NAMESPACE
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.api import is_reserved_label_domain

# Both lanes: whatever the compatibility lane ran must leave the same clean aftermath.
pytestmark = [pytest.mark.e2e, pytest.mark.compat]


async def test_no_pod_or_node_carries_kopf_annotations_or_finalizers(
    api: client.ApiClient, operator: OperatorProcess
) -> None:
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


COST_PATH = "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost"


def test_the_operator_wrote_only_what_it_may(cluster: LocalCluster) -> None:
    """From the audit log of the whole run: the operator's processes wrote pods (one
    annotation), nodes (labels of ours and one annotation), policy status, Events and its
    Lease, asked for token and access reviews (authenticated /metrics), kept the compiled
    MutatingAdmissionPolicies (named ours) and the webhook's match condition, and nothing else;
    every pod patch was guarded by the pod's UID. Only the processes' requests count:
    test_admission_guard sends forbidden writes with the same token through kubectl, on
    purpose, to see the apiserver refuse them."""
    allowed = {
        ("pods", "", "patch"),
        ("nodes", "", "patch"),
        ("schedulingpolicies", "status", "patch"),
        ("events", "", "create"),
        ("leases", "", "create"),
        ("leases", "", "update"),
        ("tokenreviews", "", "create"),
        ("subjectaccessreviews", "", "create"),
        # Policy mode: the compiled policies (server-side apply creates them too), and the
        # webhook's match condition.
        ("mutatingadmissionpolicies", "", "patch"),
        ("mutatingadmissionpolicies", "", "delete"),
        ("mutatingadmissionpolicybindings", "", "patch"),
        ("mutatingadmissionpolicybindings", "", "delete"),
        ("mutatingwebhookconfigurations", "", "patch"),
    }
    # The processes send `schedpolicy/...` (their own client) or kopf's agent, never kubectl's.
    attempts = [e for e in writes_by(cluster.audit_log) if not e.agent.startswith("kubectl/")]
    assert attempts, "the operator wrote nothing in the whole run"
    assert {(e.resource, e.subresource, e.verb) for e in attempts} <= allowed
    # A refused request (say a 403 while a restarted apiserver's authorizer warms up) is
    # logged without its body and changed nothing; the shape of every accepted write is
    # checked.
    writes = [e for e in attempts if 200 <= e.code < 300]
    assert writes
    for e in writes:
        if e.resource == "leases":
            assert e.namespace == RELEASE_NAMESPACE
        elif e.resource == "pods":
            # Only JSON Patches, each guarded by the UID (and a whole new annotations map
            # also by the resourceVersion it was computed from); no finalizer, no kopf mark.
            assert isinstance(e.request, list), e.request
            paths = {op["path"] for op in e.request}
            assert "/metadata/uid" in paths
            allowed_paths = {"/metadata/uid", "/metadata/resourceVersion", COST_PATH}
            assert paths <= allowed_paths | {"/metadata/annotations"}, paths
            for op in e.request:
                if op["path"] == "/metadata/annotations":
                    assert op["op"] == "add"
                    assert "/metadata/resourceVersion" in paths
                    assert set(op["value"]) == {"controller.kubernetes.io/pod-deletion-cost"}
                elif op["path"] != COST_PATH:
                    assert op["op"] == "test", op
        elif e.resource.startswith("mutatingadmissionpolic"):
            assert e.name.startswith("schedpolicy-hints-"), e.name
        elif e.resource == "mutatingwebhookconfigurations":
            # Only the chart's own (the audit policy keeps no body for it; kube.py sends a
            # JSON Patch of its matchConditions only).
            assert e.name == "schedpolicy", e.name
        elif e.resource == "nodes":
            assert isinstance(e.request, dict), e.request
            meta = e.request["metadata"]
            assert set(meta) <= {"uid", "labels", "annotations"}
            assert "uid" in meta
            for key in meta.get("labels", {}):
                assert not is_reserved_label_domain(key.split("/", 1)[0]), key
            assert set(meta.get("annotations", {})) <= {"schedpolicy.io/owned-labels"}
