"""A pod's deletion cost, given a view of the cluster. Pure.

The reconciler runs this on its live view; `explain`, tests and benchmarks run it on a view
built from a one-off snapshot (view/snapshot.py), so all of them agree by construction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from schedpolicy.core.deletion_cost import costs
from schedpolicy.core.deletion_cost.samples import Rejection, Sample, from_annotation
from schedpolicy.core.deletion_cost.signals.base import ZoneSpread
from schedpolicy.core.deletion_cost.signals.metric import MetricSignal
from schedpolicy.core.gpu.dra import DeviceShare
from schedpolicy.core.policy import matching
from schedpolicy.core.wellknown import FIELD_MANAGER
from schedpolicy.view.cluster import ClusterView, NodeRecord, PodRecord

_NO_LABELS: Mapping[str, str] = {}


class ViewFacts:
    """A pod's facts as the view holds them, read only when a signal asks (PodFacts).

    One is made per decision: slotted, and what is a mere attribute read is read up front,
    since signals read those several times each."""

    __slots__ = (
        "_node",
        "_pod",
        "_spread",
        "_view",
        "conditions",
        "node_labels",
        "node_name",
        "pod_uid",
    )
    pod_uid: str
    node_name: str | None  # None until bound to a node the view knows
    node_labels: Mapping[str, str]
    conditions: Mapping[str, str]

    def __init__(self, view: ClusterView, pod: PodRecord, node: NodeRecord | None) -> None:
        self._view = view
        self._pod = pod
        self._node = node
        self._spread: ZoneSpread | None = None
        self.pod_uid = pod.uid
        self.node_name = node.name if node is not None else None
        self.node_labels = node.labels if node is not None else _NO_LABELS
        self.conditions = pod.conditions

    def node_allocatable(self) -> Mapping[str, int]:
        return self._node.allocatable if self._node is not None else {}

    def node_requested(self) -> Mapping[str, int]:
        return self._view.requested(self._node.name) if self._node is not None else {}

    def device_share(self, classes: tuple[str, ...]) -> DeviceShare | None:
        if self._node is None:
            return None
        return self._view.devices.share(self._node.name, classes)

    def zone_spread(self) -> ZoneSpread:
        if self._spread is None:
            spread = self._view.zone_spread(self._pod.replicaset_uid)
            self._spread = ZoneSpread(
                spread.counts, self._view.eligible_zones(), spread.ranks.get(self._pod.uid)
            )
        return self._spread

    def sample(self, metric: MetricSignal) -> Sample | Rejection | None:
        """The pod's latest reading of a Metric signal: from its annotation, or scraped."""
        if metric.annotation is not None:
            return from_annotation(self._pod.annotations.get(metric.annotation.key))
        assert metric.prometheus is not None
        src = metric.prometheus
        return self._view.sample((self._pod.uid, src.port, src.path, src.metric))


@dataclass(frozen=True)
class PodCost:
    pod: PodRecord
    match: matching.Match
    decision: costs.CostDecision | None
    plan: costs.CostPlan


def pod_cost(
    view: ClusterView,
    pod: PodRecord,
    now: datetime | None = None,
    policies: list[matching.Policy] | None = None,
) -> PodCost:
    """The governing policy, the decision and what the operator would do, for one pod."""
    now = now or datetime.now(UTC)
    ns_labels = view.namespaces.get(pod.namespace, {})
    candidates = view.policies() if policies is None else policies
    match = matching.governing_policy(candidates, "deletionCost", pod.labels, ns_labels)
    policy = match.policy
    spec = policy.spec.deletion_cost if policy is not None else None
    node = view.nodes.get(pod.node_name) if pod.node_name else None
    decision = None
    if policy is not None and spec is not None and pod.replicaset_uid is not None:
        decision = costs.decide(spec, ViewFacts(view, pod, node), now)
    state = costs.PodCostState(
        replicaset_owned=pod.replicaset_uid is not None,
        active=pod.active,
        scheduled=pod.node_name is not None,
        current=pod.cost,
        ours=FIELD_MANAGER in pod.cost_managers,
        karpenter_current=pod.karpenter_cost,
        karpenter_ours=FIELD_MANAGER in pod.karpenter_cost_managers,
        node_leaving=node is not None and node.leaving,
        karpenter_gate=view.karpenter_gate.covers(node.labels if node is not None else None),
    )
    return PodCost(
        pod, match, decision, costs.plan(state, policy.name if policy else None, spec, decision)
    )


@dataclass(frozen=True, slots=True)
class PodOutcome:
    """The last plan for a pod, reduced to what status counts need (explain recomputes
    the full decision on demand; keeping it for every pod would cost memory)."""

    governed_by: frozenset[str]  # policies governing the pod for any pod capability
    cost_policy: str | None
    final: int | None  # the cost decided, if any
    stored: str | None  # the cost on the pod when the plan was made
    # pod-deletion-cost left to Karpenter's gate; and the disruption cost decided, if any
    yielded: bool = False
    karpenter: int | None = None


def pod_outcome(
    view: ClusterView,
    result: PodCost,
    policies: list[matching.Policy],
    interned: dict[frozenset[str], frozenset[str]],
) -> PodOutcome:
    """`interned` keeps one copy of each set of governing policies: thousands of pods
    share a handful of them."""
    pod = result.pod
    ns_labels = view.namespaces.get(pod.namespace, {})
    placement = matching.governing_policy(policies, "placement", pod.labels, ns_labels)
    governed = frozenset(m.policy.name for m in (result.match, placement) if m.policy)
    governed = interned.setdefault(governed, governed)
    policy = result.match.policy
    decision = result.decision
    final = decision.final if decision is not None else None
    karpenter = decision.karpenter if decision is not None else None
    name = policy.name if policy else None
    return PodOutcome(governed, name, final, pod.cost, result.plan.yields, karpenter)


def expected_costs(view: ClusterView, now: datetime | None = None) -> dict[str, int | None]:
    """pod UID -> the cost the operator should leave on it (None: it should carry none of ours,
    as on a Karpenter node once the gate is seen), once it is bound to a node; until then the
    operator leaves its cost alone."""
    out: dict[str, int | None] = {}
    for uid, pod in view.pods.items():
        result = pod_cost(view, pod, now)
        decision = None if result.plan.yields else result.decision
        out[uid] = decision.final if decision is not None else None
    return out
