"""Karpenter's PodDeletionCostManagement gate: once seen at work, a policy leaves
pod-deletion-cost to Karpenter on the pods of Karpenter nodes (no first write, no write after
the gate deleted it, takeOver or not) and still writes karpenter.sh/disruption-cost, which the
gate ranks by; the memory survives the annotation's deletion; the status and explain say why."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import msgspec
import pytest

from schedpolicy.app.explain.deletion_cost import pending_line
from schedpolicy.core.deletion_cost import karpenter_gate
from schedpolicy.core.deletion_cost.api import DeletionCost
from schedpolicy.core.deletion_cost.costs import CostDecision, PodCostState, plan
from schedpolicy.core.deletion_cost.karpenter_gate import GateYield, Sighting
from schedpolicy.core.deletion_cost.patches import cost_patch
from schedpolicy.core.deletion_cost.samples import Rejection
from schedpolicy.core.policy.status import Observation, desired_status, is_problem, verdicts
from schedpolicy.core.wellknown import COST_ANNOTATION, KARPENTER_COST_ANNOTATION
from schedpolicy.shell.feeds import PodFeed
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.view import reports, snapshot, wire
from schedpolicy.view.cluster import ClusterView
from schedpolicy.view.deletion_cost import decisions
from tests.unit.test_cluster import pod

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CAPACITY = {"type": "CapacityType", "capacityType": {"spot": -500}}
PLAIN = DeletionCost.model_validate({"signals": [CAPACITY]})
STEERING = DeletionCost.model_validate({"signals": [CAPACITY], "karpenterDisruptionCost": {}})
TAKE_OVER = DeletionCost.model_validate(
    {"signals": [CAPACITY], "karpenterDisruptionCost": {}, "takeOver": True}
)
K500 = str(500 * 2**19)  # -500 is 500 above the default min of -1000


def decided(spec: DeletionCost, final: int | None = -500) -> CostDecision:
    return CostDecision(
        signals=(),
        raw=final or 0,
        bucketed=final or 0,
        final=final,
        bounds=(spec.min, spec.max),
        karpenter=None if final is None else spec.karpenter_value(final),
    )


def state(
    current: str | None = None,
    ours: bool = False,
    karpenter: str | None = None,
    karpenter_ours: bool = True,
    gate: bool = True,
    rs: bool = True,
) -> PodCostState:
    return PodCostState(
        replicaset_owned=rs,
        active=True,
        scheduled=True,
        current=current,
        ours=ours,
        karpenter_current=karpenter,
        karpenter_ours=karpenter_ours,
        karpenter_gate=gate,
    )


@pytest.mark.parametrize(
    ("pod_state", "spec", "action", "value", "karpenter", "reason", "yields"),
    [
        # No gate seen: the policy writes as it always did.
        (state(gate=False), PLAIN, "write", "-500", None, "changed", False),
        # A pod new to both writers: no first write.
        (state(), PLAIN, "none", None, None, "karpenter-gate", True),
        # The gate deleted our cost: the pod looks unowned, and still gets nothing.
        (state(None, ours=False), PLAIN, "none", None, None, "karpenter-gate", True),
        # Karpenter's rank is there: left alone, not counted as a foreign cost.
        (state("-3"), PLAIN, "none", None, None, "karpenter-gate", True),
        # Our old value, from before the gate was seen: left for the gate to replace.
        (state("-500", ours=True), PLAIN, "none", None, None, "karpenter-gate", True),
        # takeOver does not take from the gate: it would undo the value every cycle.
        (state("-3"), TAKE_OVER, "write", None, K500, "karpenter-gate", True),
        (state("-3", karpenter=K500), TAKE_OVER, "none", None, None, "karpenter-gate", True),
        # The policy steers through karpenter.sh/disruption-cost, alone in its patch.
        (state(), STEERING, "write", None, K500, "karpenter-gate", True),
        (state("-3", karpenter="7"), STEERING, "write", None, K500, "karpenter-gate", True),
        (state("-3", karpenter=K500), STEERING, "none", None, None, "karpenter-gate", True),
        # Someone else's disruption cost stays theirs unless the policy takes over.
        (
            state("-3", karpenter="7", karpenter_ours=False),
            STEERING,
            "none",
            None,
            None,
            "foreign-cost",
            True,
        ),
        (
            state("-3", karpenter="7", karpenter_ours=False),
            TAKE_OVER,
            "write",
            None,
            K500,
            "karpenter-gate",
            True,
        ),
    ],
    ids=[
        "no-gate",
        "first-write",
        "after-deletion",
        "karpenters-rank",
        "our-old-value",
        "take-over-steers-only",
        "take-over-unchanged",
        "steer",
        "steer-stale",
        "steer-unchanged",
        "foreign-disruption-cost",
        "foreign-disruption-cost-take-over",
    ],
)
def test_the_gate_owns_pod_deletion_cost_on_its_nodes(
    pod_state: PodCostState,
    spec: DeletionCost,
    action: str,
    value: str | None,
    karpenter: str | None,
    reason: str,
    yields: bool,
) -> None:
    result = plan(pod_state, "p", spec, decided(spec))
    got = (result.action, result.value, result.karpenter, result.reason, result.yields)
    assert got == (action, value, karpenter, reason, yields)


HELD = CostDecision(signals=(), raw=0, bucketed=0, final=None, hold=Rejection("stale", "old"))


@pytest.mark.parametrize(
    ("pod_state", "policy", "spec", "decision", "action", "reason"),
    [
        # A held decision is held, gate or not.
        (state(), "p", STEERING, HELD, "none", "held-stale"),
        # What no policy governs any more loses our own cost, as anywhere.
        (state("100", ours=True, karpenter=K500), None, None, None, "remove", "no-policy"),
        (state("100", ours=True, rs=False), "p", STEERING, None, "remove", "not-replicaset"),
    ],
)
def test_what_the_gate_does_not_change(
    pod_state: PodCostState,
    policy: str | None,
    spec: DeletionCost | None,
    decision: CostDecision | None,
    action: str,
    reason: str,
) -> None:
    result = plan(pod_state, policy, spec, decision)
    assert (result.action, result.label, result.yields) == (action, reason, False)


def test_a_steering_patch_sets_only_the_disruption_cost() -> None:
    ops = cost_patch("u1", None, has_annotations=True, karpenter=K500)
    assert [op["path"] for op in ops] == [
        "/metadata/uid",
        "/metadata/annotations/karpenter.sh~1disruption-cost",
    ]
    whole = cost_patch("u1", None, has_annotations=False, resource_version="7", karpenter=K500)
    assert whole[-1] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {KARPENTER_COST_ANNOTATION: K500},
    }
    assert pending_line({"pending": True, "action": "write", "value": None, "karpenter": K500}) == (
        f"Pending:   write karpenter.sh/disruption-cost {K500} only"
    )


# ---- seeing the gate ---------------------------------------------------------------------

OURS = {"manager": "schedpolicy", "operation": "Update"}
KARPENTERS = {"manager": "karpenter", "operation": "Update"}


def managed(entry: dict[str, Any], *keys: str) -> dict[str, Any]:
    fields = {f"f:{k}": {} for k in keys}
    return {**entry, "fieldsV1": {"f:metadata": {"f:annotations": fields}}}


def karpenter_node(name: str = "k1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "cpu"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def plain_node(name: str = "n1") -> dict[str, Any]:
    node = karpenter_node(name)
    node["metadata"]["labels"] = {}
    return node


def costed(name: str, uid: str, node: str, value: str | None, *entries: dict[str, Any]) -> Any:
    meta: dict[str, Any] = {"labels": {"app": "web"}, "resourceVersion": "5"}
    if value is not None:
        meta["annotations"] = {COST_ANNOTATION: value}
        meta["managedFields"] = [managed(e, COST_ANNOTATION) for e in entries]
    return pod(name, uid, node=node, **meta)


POLICY = {
    "metadata": {"name": "spot-first", "uid": "uid-p", "generation": 1},
    "spec": {
        "podSelector": {"matchLabels": {"app": "web"}},
        "deletionCost": {"signals": [CAPACITY], "karpenterDisruptionCost": {}},
    },
}


K_NODE = {"karpenter.sh/nodepool": "cpu"}
OUR_COST = ("-500", frozenset({"schedpolicy"}))


@pytest.mark.parametrize(
    ("before", "after_cost", "active", "labels", "our_removal", "seen"),
    [
        (OUR_COST, None, True, K_NODE, None, True),
        # Our own removal going through is not another writer.
        (OUR_COST, None, True, K_NODE, "-500", False),
        # Only a Karpenter node's pods are the gate's.
        (OUR_COST, None, True, {}, None, False),
        # A pod on its way out, a cost still there, someone else's cost, no cost: no sign.
        (OUR_COST, None, False, K_NODE, None, False),
        (OUR_COST, "-2", True, K_NODE, None, False),
        (("-500", frozenset({"kubectl"})), None, True, K_NODE, None, False),
        ((None, frozenset()), None, True, K_NODE, None, False),
    ],
    ids=["deleted", "our-removal", "not-karpenter", "terminating", "rewritten", "foreign", "none"],
)
def test_a_deletion_of_our_cost_on_a_karpenter_node_shows_the_gate(
    before: tuple[str | None, frozenset[str]],
    after_cost: str | None,
    active: bool,
    labels: dict[str, str],
    our_removal: str | None,
    seen: bool,
) -> None:
    found = karpenter_gate.deleted(
        "ns/a",
        before,
        after_cost,
        active=active,
        node="k1",
        node_labels=labels,
        our_removal=our_removal,
    )
    assert (found is not None) is seen
    if found is not None:
        assert found.describe().startswith("the pod-deletion-cost schedpolicy wrote on pod ns/a")


def test_the_memory_keeps_the_first_sign_and_covers_karpenter_nodes_only() -> None:
    memory = karpenter_gate.Memory()
    assert not memory.covers({"karpenter.sh/nodepool": "cpu"})
    assert not memory.saw_write(("ns", "a"), frozenset({"schedpolicy"}))
    assert memory.saw_write(("ns", "a"), frozenset({"karpenter"}))
    assert not memory.saw_write(("ns", "b"), frozenset({"karpenter"}))  # the first one stays
    assert not memory.see(Sighting("deleted", "ns/c", "k1"))
    assert memory.sighting == Sighting("wrote", "ns/a")
    assert memory.covers({"karpenter.sh/nodepool": "cpu"})
    assert not memory.covers({"topology.kubernetes.io/zone": "a"})
    assert not memory.covers(None)


def _wire(body: dict[str, Any]) -> wire.Pod:
    return msgspec.json.decode(msgspec.json.encode(body), type=wire.Pod)


def _feed() -> tuple[ClusterView, Reconciler, PodFeed]:
    view = snapshot.build_view(policies=[POLICY], nodes=[karpenter_node(), plain_node()])
    reconciler = Reconciler(cast(Kube, object()), view)
    return view, reconciler, PodFeed(view, reconciler)


def _plan(view: ClusterView, uid: str) -> tuple[str, str | None, str]:
    result = decisions.pod_cost(view, view.pods[uid], NOW)
    return result.plan.action, result.plan.value, result.plan.reason


def test_no_write_war_after_the_gate_deletes_our_cost() -> None:
    """The war this prevents: the gate deletes our cost on a node it skips, the pod looks
    unowned, the policy writes again, the gate deletes again next cycle."""
    view, reconciler, feed = _feed()
    feed.upsert(_wire(costed("a", "ua", "k1", "-500", OURS)))
    feed.upsert(_wire(costed("b", "ub", "n1", "-500", OURS)))
    assert view.karpenter_gate.sighting is None
    reconciler.dirty.take_pods(view)

    feed.upsert(_wire(costed("a", "ua", "k1", None)))  # the gate deleted it

    assert view.karpenter_gate.sighting == Sighting("deleted", "ns/a", "k1")
    assert reconciler.dirty.take_pods(view) == {"ua", "ub"}  # every pod is planned again
    assert _plan(view, "ua") == ("write", None, "karpenter-gate")  # the disruption cost only
    # A new pod on a Karpenter node gets no first pod-deletion-cost; elsewhere, it does.
    feed.upsert(_wire(costed("c", "uc", "k1", None)))
    feed.upsert(_wire(costed("d", "ud", "n1", None)))
    assert _plan(view, "uc")[:2] == ("write", None)
    assert _plan(view, "ud")[:2] == ("write", "0")  # no capacity type: 0 points


def test_our_own_removal_is_not_the_gate() -> None:
    view, reconciler, feed = _feed()
    feed.upsert(_wire(costed("a", "ua", "k1", "-500", OURS)))
    reconciler.costs.removed["ua"] = "-500"
    feed.upsert(_wire(costed("a", "ua", "k1", None)))
    assert view.karpenter_gate.sighting is None


def test_karpenters_write_shows_the_gate_and_a_restart_finds_it_again() -> None:
    pods = [costed("a", "ua", "k1", "-2", KARPENTERS), costed("b", "ub", "k1", None)]
    view = snapshot.build_view(policies=[POLICY], nodes=[karpenter_node()], pods=pods)
    assert view.karpenter_gate.sighting == Sighting("wrote", "ns/a")
    assert _plan(view, "ub")[:2] == ("write", None)


def test_the_status_says_what_it_yields_and_why() -> None:
    pods = [
        costed("a", "ua", "k1", "-2", KARPENTERS),
        costed("b", "ub", "k1", None),
        costed("c", "uc", "n1", None),
    ]
    # No capacity type on the node: cost 0, which is 1000 above min.
    pods[1]["metadata"]["annotations"] = {KARPENTER_COST_ANNOTATION: str(1000 * 2**19)}
    pods[1]["metadata"]["managedFields"] = [managed(OURS, KARPENTER_COST_ANNOTATION)]
    view = snapshot.build_view(policies=[POLICY], nodes=[karpenter_node(), plain_node()], pods=pods)
    outcomes = {}
    for uid, record in view.pods.items():
        result = decisions.pod_cost(view, record, NOW)
        outcomes[uid] = decisions.pod_outcome(view, result, view.policies(), {})
    report = reports.status_report(view, outcomes, reports.Findings())
    gate = report.gate["spot-first"]
    assert (gate.yielded, gate.steered, gate.steering, gate.take_over) == (2, 1, True, False)
    assert report.foreign == {}  # Karpenter's ranks are the gate's, not a foreign writer's
    (observed,) = reports.observations(list(view.policy_objects()), report, view.policies())
    conditions = {c["type"]: c for c in desired_status(observed, None, "T")["conditions"]}
    yielding = conditions["Yielding"]
    assert (yielding["status"], yielding["reason"]) == ("True", "KarpenterDeletionCostGate")
    assert (
        "on the pods of Karpenter nodes (label karpenter.sh/nodepool): 2 pods now"
        in (yielding["message"])
    )
    assert conditions["Conflicting"]["status"] == "False"


@pytest.mark.parametrize(
    ("gate", "said", "unsaid"),
    [
        (
            GateYield(Sighting("wrote", "ns/a"), 3, True, 2, False),
            [
                "field manager karpenter wrote pod-deletion-cost on pod ns/a",
                "3 pods now",
                "every 60 s",
                "deletes it, whoever wrote it, on the nodes it skips",
                "steers Karpenter's ranking through karpenter.sh/disruption-cost",
                "2 of them carry this policy's value",
            ],
            ["takeOver"],
        ),
        (
            GateYield(Sighting("deleted", "ns/a", "k1"), 1, False, 0, True),
            [
                "(Karpenter node k1) was deleted by another writer",
                "1 pod now",
                "takeOver: true does not apply there",
                "every cycle",
                "set deletionCost.karpenterDisruptionCost",
            ],
            ["carry this policy's value"],
        ),
    ],
    ids=["steering", "take-over-no-steering"],
)
def test_the_yielding_condition(gate: GateYield, said: list[str], unsaid: list[str]) -> None:
    (yielding,) = [
        v for v in verdicts(Observation("p", 1, karpenter_gate=gate)) if v.type == "Yielding"
    ]
    assert (yielding.type, yielding.status, yielding.reason) == (
        "Yielding",
        "True",
        "KarpenterDeletionCostGate",
    )
    for text in said:
        assert text in yielding.message
    for text in unsaid:
        assert text not in yielding.message


def test_yielding_is_news_in_the_reason_column_but_no_problem() -> None:
    gate = GateYield(Sighting("wrote", "ns/a"), 3, True, 2, False)
    status = desired_status(Observation("p", 1, karpenter_gate=gate), None, "T")
    assert status["summary"]["reason"] == "KarpenterDeletionCostGate"
    assert not any(is_problem(c) for c in status["conditions"])
    degraded = Observation("p", 1, karpenter_gate=gate, degraded=["x"], degraded_reason="Stuck")
    assert desired_status(degraded, None, "T")["summary"]["reason"] == "Stuck"


def test_explain_reads_what_the_controller_said_in_the_status() -> None:
    status = {
        "conditions": [
            {"type": "Yielding", "status": "True", "reason": "KarpenterDeletionCostGate"}
        ]
    }
    assert karpenter_gate.from_status("p", status) == Sighting("status", policy="p")
    assert karpenter_gate.from_status("p", {"conditions": []}) is None
    line = karpenter_gate.explain(Sighting("status", policy="p"), "k1", True, True)
    assert "left to Karpenter's PodDeletionCostManagement gate on node k1" in line
    assert "takeOver does not apply here" in line
    assert "the controller says so in the status of policy p" in line
