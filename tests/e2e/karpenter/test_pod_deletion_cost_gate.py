"""Karpenter's PodDeletionCostManagement gate on, beside a policy: no write war, on the nodes
the gate ranks nor on the nodes it skips.

What the gate does (sigs.k8s.io/karpenter v1.15.0, pkg/controllers/pod/deletioncost): every
60 s, when its cluster state changed (forced every 5 min), it ranks the nodes it manages and
writes pod-deletion-cost -n..-1 on their ReplicaSet pods; on the nodes it skips (a pod with
karpenter.sh/do-not-disrupt, a nominated or uninitialized node, a PDB, beyond the budget) it
DELETES the annotation, whoever wrote it, with a merge patch that sets it to null. The
deletion takes the field's managedFields entry with it, so the pod then looks as if nobody had
costed it. A policy that wrote whatever looked unowned would write again, and the gate would
delete again on its next cycle, for as long as the node stays skipped: a write war.

The choice, and why. Once the controller has seen the gate at work (a pod-deletion-cost
managed by `karpenter`, or one of ours deleted by another writer on a Karpenter node), every
policy YIELDS pod-deletion-cost on the pods of Karpenter nodes: no first write, no write
after a deletion. `takeOver: true` does not change that: taking the annotation back could
only ever be a war, since the gate overwrites or deletes it every cycle without looking; and
with the gate on, Karpenter's consolidation no longer reads pod-deletion-cost at all (it reads
karpenter.sh/disruption-cost), so there is nothing to win there but the ReplicaSet
controller's order between two of Karpenter's cycles. The policy keeps writing
karpenter.sh/disruption-cost, which the gate's ranking reads, so it still steers which nodes
Karpenter ranks first, and its status says all this (`Yielding`, reason
KarpenterDeletionCostGate, with the number of pods left to Karpenter).

The scene: a Deployment spread over (a) a node holding a do-not-disrupt pod, (b) a node
Karpenter keeps nominated, and (c) ordinary nodes, costed by the policy while the gate is still
off; then the gate is switched on, and for SCHEDPOLICY_COEXIST_SECONDS (600 by default) the
Deployment scales up and down every minute, so that Karpenter launches (and nominates) fresh
nodes and its gate runs every cycle. Node (b) is kept nominated the way Karpenter nominates any
node: pods it places there in its provisioning simulation while they stay pending. They name a
scheduler nobody runs and carry PodScheduled=False (Unschedulable), so each provisioning pass
(every 10 s for each pending pod) nominates (b) again for 10 s; five of them, created apart,
keep the window closed. That the gate really skipped (a) and (b) is read from what it did
there (it deleted, and never ranked, at least after its first cycle), from Karpenter's
`Nominated` events, and from its own log of each ranking (cleanup-only nodes).

Measured (2026-12-07, this machine): over the 10-minute window, 11 gate rankings, each but
the first with both (a) and (b) cleanup-only; pod-deletion-cost writes karpenter 16,
schedpolicy 10 (all before the gate was switched on), deletions karpenter 7, 10 hand changes
with at most 1 on a pod, 0 written again after a deletion. The same scene with the rule
switched off (the policy as it was) gave, in 4 minutes, 30 deletions by the gate, 30 writes
again by the policy, and up to 10 hand changes on one pod: the war this test exists for.

It runs last among the tests that share the package's operator (files go in name order;
test_serving_day runs its own clusters): the controller remembers the gate for its life.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from localcluster import LocalCluster, audit
from localcluster.karpenter import NODEPOOL_LABEL, KarpenterOptions
from localcluster.operator_process import OperatorProcess
from schedpolicy.app import explain
from schedpolicy.core.wellknown import COST_ANNOTATION, KARPENTER_COST_ANNOTATION
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from tests.e2e.karpenter.conftest import (
    KARPENTER_USER,
    SPOT_FIRST,
    annotation,
    deployment,
    pods,
    running_pods,
)
from tests.e2e.karpenter.gate_audit import Figures, figures
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import apply, get_json, namespace_policy

pytestmark = pytest.mark.e2e

HOLD_LABEL = "schedpolicy-e2e/hold"  # on node (b): where the pending pods want to go
NOBODY = "schedpolicy-e2e-nobody"  # a scheduler nobody runs
# A provisioning pass every 10 s / HOLDERS. Three let (b)'s nomination lapse over one of
# eleven rankings in a cold CI run, with Go builds taking the cores beside Karpenter.
HOLDERS = 5


def test_with_karpenters_gate_on_the_policy_yields_on_its_nodes_and_no_cost_changes_hands_twice(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    seconds = float(os.environ.get("SCHEDPOLICY_COEXIST_SECONDS", "600"))
    started = audit.now()
    name = f"spot-first-{ns}"
    apply(kcluster, namespace_policy(name, ns, deletionCost=SPOT_FIRST))
    scene = build_scene(kcluster, ns)
    print(f"\nnodes: (a) {scene['a']}, (b) {scene['b']}, (c) {', '.join(scene['c'])}")
    log = kcluster.workdir / "logs" / "karpenter.log"
    offset = log.stat().st_size if log.exists() else 0
    kcluster.start_karpenter(KarpenterOptions(feature_gates={"PodDeletionCostManagement": True}))
    try:
        yielding = wait_until(
            lambda: condition(kcluster, name, "Yielding"),
            within=180,
            what="the policy's Yielding condition",
        )
        seen = audit.now()
        churn(kcluster, ns, seconds)
        judge(kcluster, ns, name, scene, started, seen, log, offset)
        print(f"Yielding: {yielding['reason']}: {yielding['message']}")
    finally:
        kcluster.start_karpenter(KarpenterOptions())


# ---- the scene -----------------------------------------------------------------------------


def build_scene(kcluster: LocalCluster, ns: str) -> dict[str, Any]:
    """With the gate still off: (a) a node with a do-not-disrupt pod, then the web Deployment
    filling it, (c) the node(s) launched for the next replicas, (b) the one(s) after that,
    kept nominated; every replica costed by the policy."""
    cpu_pool = {NODEPOOL_LABEL: "cpu"}
    guard = deployment(
        "guard",
        1,
        cpu="500m",
        node_selector=cpu_pool,
        annotations={"karpenter.sh/do-not-disrupt": "true"},
    )
    kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[guard])
    (a,) = {p["spec"]["nodeName"] for p in running_pods(kcluster, ns, "guard", 1)}
    web = deployment("web", 3, cpu="1000m", node_selector=cpu_pool)
    kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[web])
    on_a = nodes_of(running_pods(kcluster, ns, "web", 3))
    assert a in on_a, f"no web replica on the do-not-disrupt node {a}: {on_a}"
    c = scale_onto_new_nodes(kcluster, ns, 6, set(on_a))
    ((b, _),) = scale_onto_new_nodes(kcluster, ns, 9, set(on_a) | set(c)).most_common(1)
    hold_nominated(kcluster, ns, b)

    def costed() -> list[dict[str, Any]] | None:
        found = [*pods(kcluster, ns, "web"), *pods(kcluster, ns, "guard")]
        ours = [p for p in found if "schedpolicy" in cost_managers(p)]
        return found if len(ours) == len(found) == 10 else None

    wait_until(costed, within=90, what="the policy's cost on all 10 pods, gate still off")
    return {"a": a, "b": b, "c": sorted(c), "pods": {n: p for n, p in placed(kcluster, ns)}}


def nodes_of(found: Iterable[dict[str, Any]]) -> Counter[str]:
    return Counter(p["spec"]["nodeName"] for p in found)


def scale_onto_new_nodes(
    kcluster: LocalCluster, ns: str, replicas: int, old: set[str]
) -> Counter[str]:
    """Web replicas per node launched for the new ones."""
    kcluster.kubectl("scale", "-n", ns, "deployment/web", f"--replicas={replicas}")
    on = nodes_of(running_pods(kcluster, ns, "web", replicas))
    new = Counter({n: k for n, k in on.items() if n not in old})
    assert new, f"{replicas} web replicas and no node launched for them: {on}"
    return new


def placed(kcluster: LocalCluster, ns: str) -> list[tuple[str, str]]:
    """(pod, node) of every web replica."""
    return [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods(kcluster, ns, "web")]


def hold_nominated(kcluster: LocalCluster, ns: str, node: str) -> None:
    """Pods Karpenter places on `node` in its simulation and nobody binds: each provisioning
    pass nominates the node for 10 s, and each pending pod brings a pass every 10 s."""
    kcluster.kubectl("label", "node", node, f"{HOLD_LABEL}=nominated", "--overwrite")
    for i in range(HOLDERS):
        holder = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"holder-{i}", "labels": {"app": "holder"}},
            "spec": {
                "schedulerName": NOBODY,
                "nodeSelector": {HOLD_LABEL: "nominated"},
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                    }
                ],
            },
        }
        kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[holder])
        unschedulable = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": f"held for {node} by the test",
                    }
                ]
            }
        }
        kcluster.kubectl(
            "patch", "pod", f"holder-{i}", "-n", ns, "--subresource=status",
            "--type=merge", "-p", json.dumps(unschedulable),
        )  # fmt: skip
        time.sleep(10 / HOLDERS)
    wait_until(
        lambda: any(node in e for e in events(kcluster, ns, "Nominated")),
        within=60,
        what=f"Karpenter's Nominated event naming {node}",
    )


def churn(kcluster: LocalCluster, ns: str, seconds: float) -> None:
    """Scale up (Karpenter launches, and nominates, a node for the new replicas) and down
    every minute, so that the gate's cluster state changes every cycle."""
    deadline = time.monotonic() + seconds
    replicas = 9
    while time.monotonic() < deadline:
        replicas = 11 if replicas == 9 else 9
        kcluster.kubectl("scale", "-n", ns, "deployment/web", f"--replicas={replicas}")
        time.sleep(min(60.0, max(0.0, deadline - time.monotonic())))


# ---- what it shows -------------------------------------------------------------------------


def judge(
    kcluster: LocalCluster,
    ns: str,
    name: str,
    scene: dict[str, Any],
    started: datetime,
    seen: datetime,
    log: Path,
    offset: int,
) -> None:
    events_ = list(audit.events(kcluster.audit_log))
    found = figures(events_, ns, since=started)
    steering = figures(events_, ns, KARPENTER_COST_ANNOTATION, since=started)
    cycles = ranking_cycles(log, offset)
    print("audit, pod-deletion-cost in the test's namespace:")
    for line in found.lines():
        print(f"  {line}")
    print(f"  karpenter.sh/disruption-cost writes: {dict(steering.writes)}")
    print(f"gate ranking cycles: {len(cycles)} (cleanup-only nodes each: {cycles})")
    print(f"Karpenter's Nominated events: {events(kcluster, ns, 'Nominated')[:3]}")
    print(f"DisruptionBlocked events: {events(kcluster, '', 'DisruptionBlocked')[:6]}")

    assert found.changed_hands_twice() == {}, "a pod's cost changed hands twice"
    assert found.rewritten_after_deletion() == {}, "a cost deleted and re-written more than once"
    rewritten = {p: h.turns for p, h in found.pods.items() if h.rewrites_after_deletion()[0]}
    assert rewritten == {}, "written again by another writer after a deletion"
    late = figures(events_, ns, since=seen)
    assert late.writes["schedpolicy"] == 0, "pod-deletion-cost written once the gate was seen"
    skipped_by_the_gate(found, scene)
    # The first ranking may come before Karpenter, just restarted, nominates (b) again. On a
    # loaded machine one late provisioning pass may let (b)'s 10 s nomination lapse over one
    # later ranking, which then skips (a) alone.
    assert len(cycles) >= 2, cycles
    later = cycles[1:]
    assert all(n >= 1 for n in later), cycles
    assert sum(n < 2 for n in later) <= 1, cycles
    end_state(kcluster, ns, name, scene["a"])


def skipped_by_the_gate(found: Figures, scene: dict[str, Any]) -> None:
    """(a): the gate deleted our cost on every replica there and never ranked one. (b): it
    deleted there, and what stays there carries no cost."""

    def turns(node: str) -> list[list[tuple[str, str]]]:
        return [
            [(who, did) for who, did, _ in found.pods[p].turns]
            for p, n in scene["pods"].items()
            if n == node
        ]

    for seq in turns(scene["a"]):
        first = seq.index((KARPENTER_USER, "delete"))
        assert set(seq[:first]) == {("schedpolicy", "write")}, seq
        assert seq[first:] == [(KARPENTER_USER, "delete")], seq
    on_b = turns(scene["b"])
    assert any((KARPENTER_USER, "delete") in seq for seq in on_b), on_b


def end_state(kcluster: LocalCluster, ns: str, name: str, node_a: str) -> None:
    """Karpenter's costs under its own field manager; (a) and (b) with none; every replica
    with the policy's karpenter.sh/disruption-cost; the status saying what it yields; and
    explain saying why, for a replica on (a)."""
    web = pods(kcluster, ns, "web")
    by_karpenter = [p for p in web if annotation(p, COST_ANNOTATION) is not None]
    assert all(cost_managers(p) == {KARPENTER_USER} for p in by_karpenter), [
        (p["metadata"]["name"], cost_managers(p)) for p in by_karpenter
    ]

    def steered() -> bool:
        now = pods(kcluster, ns, "web")
        return all("schedpolicy" in managers(p, KARPENTER_COST_ANNOTATION) for p in now)

    wait_until(steered, within=60, what="the policy's disruption cost on every replica")
    conditions = wait_until(
        lambda: condition(kcluster, name, None), within=30, what="the policy's status"
    )
    yielding = conditions["Yielding"]
    assert (yielding["status"], yielding["reason"]) == ("True", "KarpenterDeletionCostGate")
    told = r"Karpenter nodes \(label karpenter.sh/nodepool\): \d+ pods? now"
    assert re.search(told, yielding["message"]), yielding["message"]
    assert "karpenter.sh/disruption-cost" in yielding["message"]
    assert conditions["Conflicting"]["status"] == "False", conditions["Conflicting"]
    on_a = [p["metadata"]["name"] for p in web if p["spec"]["nodeName"] == node_a]
    assert [
        p for p in web if p["metadata"]["name"] in on_a and annotation(p, COST_ANNOTATION)
    ] == []
    out = asyncio.run(explained(kcluster, f"{ns}/{on_a[0]}"))
    print(explain.render_pod(out))
    assert "PodDeletionCostManagement gate" in (out["yielded"] or ""), out
    assert out["write"] == {"pending": False, "reason": "karpenter-gate"}, out["write"]


async def explained(kcluster: LocalCluster, ref: str) -> dict[str, Any]:
    kube = await Kube.connect(Credentials(kubeconfig=str(kcluster.kubeconfig)), "e2e")
    try:
        return await explain.explain_pod(kube, ref)
    finally:
        await kube.close()


# ---- reading the cluster -------------------------------------------------------------------


def condition(kcluster: LocalCluster, policy: str, kind: str | None) -> Any:
    """One condition of the policy's status when it is True (`kind`), or all of them."""
    status = get_json(kcluster, "schedulingpolicy", policy).get("status", {})
    found = {c["type"]: c for c in status.get("conditions", [])}
    if kind is None:
        return found or None
    c = found.get(kind)
    return c if c and c["status"] == "True" else None


def managers(pod: dict[str, Any], key: str) -> set[str]:
    field = f"f:{key}"
    return {
        e["manager"]
        for e in pod["metadata"].get("managedFields") or []
        if field in (e.get("fieldsV1") or {}).get("f:metadata", {}).get("f:annotations", {})
    }


def cost_managers(pod: dict[str, Any]) -> set[str]:
    return managers(pod, COST_ANNOTATION)


def events(kcluster: LocalCluster, ns: str, reason: str) -> list[str]:
    scope = ["-n", ns] if ns else ["-A"]
    listed = get_json(kcluster, "events", *scope, "--field-selector", f"reason={reason}")
    return [f"{e['involvedObject']['name']}: {e.get('message', '')}" for e in listed["items"]]


def ranking_cycles(log: Path, offset: int) -> list[int]:
    """Cleanup-only nodes in each of the gate's rankings since `offset` in Karpenter's log."""
    with log.open() as f:
        f.seek(offset)
        text = f.read()
    return [
        int(m.group(1))
        for line in text.splitlines()
        if "completed node ranking" in line
        and (m := re.search(r'"cleanupOnlyNodes":\s*(\d+)', line))
    ]
