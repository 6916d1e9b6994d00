"""Karpenter's PodDeletionCostManagement gate on: Karpenter writes pod-deletion-cost itself,
the policy yields and names it, and the two writers never take the annotation back and forth.

It runs last in the package (files are collected in name order): it restarts Karpenter twice,
with the gate on, and with it off again when done.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from localcluster import LocalCluster, audit
from localcluster.karpenter import NODEPOOL_LABEL, KarpenterOptions
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.wellknown import COST_ANNOTATION
from tests.e2e.karpenter.conftest import KARPENTER_USER, SPOT_FIRST, deployment, pods, running_pods
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import apply, get_json, namespace_policy

pytestmark = pytest.mark.e2e


def test_with_karpenter_writing_the_deletion_cost_the_policy_yields_and_names_it(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    """Karpenter with its PodDeletionCostManagement gate on writes pod-deletion-cost from its
    own ranking. The policy (no takeOver) leaves those pods alone, says who writes them, and
    the two never take the annotation back and forth."""
    seconds = float(os.environ.get("SCHEDPOLICY_COEXIST_SECONDS", "600"))
    kcluster.start_karpenter(KarpenterOptions(feature_gates={"PodDeletionCostManagement": True}))
    try:
        coexist(kcluster, ns, seconds)
    finally:
        kcluster.start_karpenter(KarpenterOptions())


def coexist(kcluster: LocalCluster, ns: str, seconds: float) -> None:
    started = audit.now()
    name = f"spot-first-{ns}"
    apply(kcluster, namespace_policy(name, ns, deletionCost=SPOT_FIRST))
    doc = deployment("web", 6, cpu="1000m", node_selector={NODEPOOL_LABEL: "cpu"})
    kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[doc])
    running_pods(kcluster, ns, "web", 6)

    def karpenter_owns_one() -> bool:
        return any(KARPENTER_USER in cost_managers(p) for p in pods(kcluster, ns, "web"))

    wait_until(karpenter_owns_one, within=150, what="Karpenter's first pod-deletion-cost write")

    def conflicting() -> dict[str, Any] | None:
        policy = get_json(kcluster, "schedulingpolicy", name)
        cond = {c["type"]: c for c in policy.get("status", {}).get("conditions", [])}
        c = cond.get("Conflicting", {})
        ok = c.get("reason") == "ForeignCostWriter" and f"by {KARPENTER_USER}" in c["message"]
        return c if ok else None

    wait_until(conflicting, within=60, what="Conflicting=ForeignCostWriter naming karpenter")
    # Churn for the rest of the window, so that Karpenter ranks again and again and new
    # pods arrive for both writers to see.
    deadline = time.monotonic() + seconds
    replicas = 6
    while time.monotonic() < deadline:
        replicas = 4 if replicas == 6 else 6
        kcluster.kubectl("scale", "-n", ns, "deployment/web", f"--replicas={replicas}")
        time.sleep(min(60.0, max(0.0, deadline - time.monotonic())))
    wars = write_wars(kcluster.audit_log, ns, started)
    assert wars == {}, f"pods whose pod-deletion-cost changed hands more than once: {wars}"
    ours_after = [
        p["metadata"]["name"]
        for p in pods(kcluster, ns, "web")
        if KARPENTER_USER in cost_managers(p) and "schedpolicy" in cost_managers(p)
    ]
    assert ours_after == []


def cost_managers(pod: dict[str, Any]) -> set[str]:
    field = f"f:{COST_ANNOTATION}"
    return {
        e["manager"]
        for e in pod["metadata"].get("managedFields") or []
        if field in (e.get("fieldsV1") or {}).get("f:metadata", {}).get("f:annotations", {})
    }


def write_wars(log: Path, ns: str, since: Any) -> dict[str, list[str]]:
    """Pods whose pod-deletion-cost passed from one writer to another and back, from the
    audit log's patch bodies: the writers in order, for each such pod."""
    writers: dict[str, list[str]] = defaultdict(list)
    for event in audit.events(log):
        if event.namespace != ns or event.resource != "pods" or event.at < since:
            continue
        if (
            event.verb != "patch"
            or event.code >= 300
            or COST_ANNOTATION not in json.dumps(event.request)
        ):
            continue
        who = "schedpolicy" if event.user == audit.OPERATOR_USER else event.user
        if not writers[event.name] or writers[event.name][-1] != who:
            writers[event.name].append(who)
    return {pod: seq for pod, seq in writers.items() if len(seq) > 2}
