"""Policy mode: placement hints compiled into MutatingAdmissionPolicies that the chart's
webhook configuration owns, and a policy the compiler cannot express left on the webhook.

These run last in the package (files are collected in name order), as they always have: the
last one floods the compiler with more policies than it takes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.placement import compiler as admission_policy
from tests.e2e.kubeobjects import PAUSE_IMAGE, wait_until
from tests.e2e.placement.conftest import (
    HINTS,
    SCHEDULER,
    WEBHOOK_CONFIGURATION,
    CreatePod,
    compiled,
)
from tests.e2e.pools import apply_namespace_policy, get_json, namespace_policy

pytestmark = pytest.mark.e2e


async def test_compiled_objects_follow_the_policy(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
) -> None:
    """Policy mode writes one MutatingAdmissionPolicy and binding per policy, owned by the
    webhook configuration, narrows the webhook to nothing when all are compiled, and
    removes them with the policy."""
    if mode != "policy":
        pytest.skip("the compiled objects exist only in policy mode")
    served = f"mapped-{namespace}"
    apply_namespace_policy(cluster, policies, served, namespace, placement={"avoidGPUNodes": True})
    status = await compiled(cluster, served)
    name = f"schedpolicy-hints-{served}"
    assert status["admission"] == {
        "path": "MutatingAdmissionPolicy",
        "reason": "Compiled",
        "policyObject": name,
    }
    # Owned by the chart's webhook configuration, so that an uninstall takes them along.
    uid = get_json(cluster, "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION)["metadata"][
        "uid"
    ]
    for kind in ("mutatingadmissionpolicy", "mutatingadmissionpolicybinding"):
        stored = get_json(cluster, kind, name)
        assert [o["uid"] for o in stored["metadata"]["ownerReferences"]] == [uid]
    config = get_json(cluster, "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION)
    conditions = config["webhooks"][0].get("matchConditions", [])
    assert [c["expression"] for c in conditions] == ["false"]

    cluster.kubectl("delete", "spol", served)

    def removed() -> bool:
        listed = cluster.kubectl(
            "get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings", "-o", "name"
        )
        return name not in listed

    await asyncio.to_thread(wait_until, removed, within=30, what=f"{served}'s objects removed")


async def test_a_policy_cel_cannot_express_stays_on_the_webhook(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    webhook_process: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """Under more higher-precedence overlapping policies than the compiler takes, a policy
    is not compiled: its Compiled condition says why, the webhook keeps being called for
    its pods, and hints them."""
    if mode != "policy":
        pytest.skip("only policy mode compiles")
    many = admission_policy.MAX_EARLIER_POLICIES + 1
    docs = [
        namespace_policy(
            f"high-{i}-{namespace}"[:63],
            namespace,
            priority=900,
            podSelector={"matchLabels": {"app": f"other-{i}"}},
            placement={"avoidGPUNodes": True},
        )
        for i in range(many)
    ]
    policies.extend(d["metadata"]["name"] for d in docs)
    low = f"low-{namespace}"
    docs.append(namespace_policy(low, namespace, priority=1, placement={"avoidGPUNodes": True}))
    policies.append(low)
    cluster.kubectl("apply", "-f", "-", objects=docs)

    def inexpressible() -> dict[str, Any] | None:
        conditions = get_json(cluster, "spol", low).get("status", {}).get("conditions", [])
        found = {c["type"]: c for c in conditions}.get("Compiled", {})
        return found if found.get("reason") == "Inexpressible" else None

    cond = await asyncio.to_thread(wait_until, inexpressible, within=60, what=f"{low} refused")
    assert cond["status"] == "False"
    assert cond["message"].startswith(f"priority: {many} policies of higher precedence")
    assert cond["message"].endswith("the webhook serves this policy")
    assert get_json(cluster, "spol", low)["status"]["admission"]["path"] == "Webhook"
    await compiled(cluster, docs[0]["metadata"]["name"])
    # It selects pods by namespace only, so the webhook is called for every pod.
    config = get_json(cluster, "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION)
    assert config["webhooks"][0].get("matchConditions", []) == []

    before = webhook_process.metric("schedpolicy_webhook_requests_total", result="hinted") or 0
    body = {
        "metadata": {"name": "by-the-webhook", "labels": {"app": "mine"}},
        "spec": {"containers": [{"name": "c", "image": PAUSE_IMAGE}]},
    }
    created = await create_pod(namespace, body)
    assert created.spec.scheduler_name == SCHEDULER
    assert json.loads(created.metadata.annotations[HINTS])["policy"] == low
    after = webhook_process.metric("schedpolicy_webhook_requests_total", result="hinted") or 0
    assert after == before + 1
