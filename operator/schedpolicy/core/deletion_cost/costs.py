"""A pod's deletion cost from its signals. Pure.

    cost = clamp(bucket(sum of signal points), min, max)

`bucket` rounds down to a multiple of `deletionCost.bucket` (towards minus
infinity, so -150 becomes -200 with bucket 100), which keeps small signal
changes from causing writes. The decision keeps every intermediate value and
says in words how each was reached, for `schedpolicy explain`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from schedpolicy.core.consolidation.fill import NodeFill
from schedpolicy.core.deletion_cost import karpenter_gate
from schedpolicy.core.deletion_cost.api import KARPENTER_COST_DIVISOR, DeletionCost, Signal
from schedpolicy.core.deletion_cost.samples import Rejection
from schedpolicy.core.deletion_cost.signals.base import PodFacts
from schedpolicy.core.gpu.dra import DeviceShare


@dataclass(frozen=True)
class SignalPoints:
    type: str
    points: int
    detail: str
    fill: NodeFill | None = None  # NodeConsolidation's per-resource shares
    devices: DeviceShare | None = None  # and the DRA devices that joined them


@dataclass(frozen=True)
class CostDecision:
    signals: tuple[SignalPoints, ...]
    raw: int
    bucketed: int
    final: int | None  # None when the pod's cost must be left as it is
    hold: Rejection | None = None
    bounds: tuple[int, int] = (0, 0)
    bucket: int = 1
    karpenter: int | None = None  # karpenter.sh/disruption-cost, when the policy opts in
    karpenter_scale: int = 0

    def explain(self) -> list[str]:
        lines = [f"{s.type}: {s.detail} -> {s.points:+d}" for s in self.signals]
        if self.hold is not None:
            lines.append(
                f"held: {self.hold.detail}; the pod keeps the cost it has ({self.hold.reason})"
            )
            return lines
        low, high = self.bounds
        lines.append(
            f"sum {self.raw:+d}, rounded down to a multiple of {self.bucket}: {self.bucketed:+d},"
            f" clamped to [{low}, {high}]: {self.final}"
        )
        if self.karpenter is not None:
            per_pod = 1 + self.karpenter / KARPENTER_COST_DIVISOR
            lines.append(
                f"karpenter.sh/disruption-cost: ({self.final} - {low}) x {self.karpenter_scale}"
                f" = {self.karpenter} (Karpenter prices the pod at 1 + {self.karpenter}/2^27 ="
                f" {per_pod:.4f})"
            )
        return lines


def signal_points(signal: Signal, facts: PodFacts, now: datetime) -> SignalPoints | Rejection:
    """One signal's points for one pod, by the scorer its registry entry names."""
    scored = signal.kind().score(signal.params(), facts, now)
    if isinstance(scored, Rejection):
        return scored
    return SignalPoints(signal.type, scored.points, scored.detail, scored.fill, scored.devices)


def bucket_down(value: int, bucket: int) -> int:
    return (value // bucket) * bucket


def decide(spec: DeletionCost, facts: PodFacts, now: datetime) -> CostDecision:
    parts: list[SignalPoints] = []
    hold: Rejection | None = None
    for signal in spec.signals:
        result = signal_points(signal, facts, now)
        if isinstance(result, Rejection):
            hold = hold or result
            parts.append(SignalPoints(signal.type, 0, f"no usable sample: {result.detail}"))
            continue
        parts.append(result)
    raw = sum(p.points for p in parts)
    bucketed = bucket_down(raw, spec.bucket)
    final = None if hold else max(spec.min, min(spec.max, bucketed))
    karpenter = spec.karpenter_disruption_cost
    return CostDecision(
        signals=tuple(parts),
        raw=raw,
        bucketed=bucketed,
        final=final,
        hold=hold,
        bounds=(spec.min, spec.max),
        bucket=spec.bucket,
        karpenter=None if final is None else spec.karpenter_value(final),
        karpenter_scale=karpenter.scale if karpenter else 0,
    )


# ---- what to do with the annotation ------------------------------------------------------

PlanAction = Literal["write", "remove", "none"]
# Why a plan is what it is. The metric label of a held plan also names the sample's problem
# (held-stale), from the decision: see CostPlan.label.
PlanReason = Literal[
    "changed",
    "unchanged",
    "foreign-cost",
    "terminating",
    "node-leaving",
    "not-replicaset",
    "no-policy",
    "unscheduled",
    "held",
    "karpenter-gate",
]


@dataclass(frozen=True)
class CostPlan:
    action: PlanAction
    # The pod-deletion-cost to write, or (for remove) the value expected there now. None in a
    # write leaves it alone (Karpenter's gate owns it) and writes `karpenter` only.
    value: str | None
    reason: PlanReason
    policy: str | None = None
    decision: CostDecision | None = None
    # karpenter.sh/disruption-cost in the same patch: the value to write, or (for remove)
    # our value expected there now; None leaves that annotation alone.
    karpenter: str | None = None
    # pod-deletion-cost is left to Karpenter's gate (core/deletion_cost/karpenter_gate.py)
    yields: bool = False

    @property
    def label(self) -> str:
        """The reason as the metrics and explain name it: a held plan says what held it."""
        if self.reason == "held" and self.decision is not None and self.decision.hold:
            return f"held-{self.decision.hold.reason}"
        return self.reason


@dataclass(frozen=True)
class PodCostState:
    """What the planner needs to know about a pod besides its signals."""

    replicaset_owned: bool
    active: bool
    scheduled: bool  # bound to a node
    current: str | None  # the stored pod-deletion-cost, if any
    ours: bool  # whether our field manager owns the stored value
    karpenter_current: str | None = None  # the stored karpenter.sh/disruption-cost
    karpenter_ours: bool = False
    node_leaving: bool = False  # its node is being deleted or drained by an autoscaler
    # Karpenter's deletion-cost gate has been seen, and the pod is on a Karpenter node.
    karpenter_gate: bool = False


def plan(
    pod: PodCostState,
    policy: str | None,
    spec: DeletionCost | None,
    decision: CostDecision | None,
) -> CostPlan:
    """Write, remove or leave the pod's cost, and why.

    Only ReplicaSet-owned pods get a cost; a value someone else wrote is left
    alone unless the policy takes over; a held decision (untrustworthy sample),
    a pod not yet bound to a node, a pod on its way out and the pods of a node that is
    being drained are left as they are;
    our own value is removed when no policy governs the pod any more;
    on a Karpenter node once its deletion-cost gate is seen, pod-deletion-cost is Karpenter's
    (even with takeOver) and only karpenter.sh/disruption-cost is written.
    """
    if not pod.active:
        return CostPlan("none", None, "terminating", policy, decision)
    if pod.node_leaving:
        # Every pod there is about to be evicted: no scale-down will choose among them, and
        # a write would race the eviction.
        return CostPlan("none", None, "node-leaving", policy, decision)
    ours_karpenter = pod.karpenter_current if pod.karpenter_ours else None
    if not pod.replicaset_owned or policy is None or spec is None or decision is None:
        if pod.current is not None and pod.ours:
            why: PlanReason = "not-replicaset" if not pod.replicaset_owned else "no-policy"
            return CostPlan("remove", pod.current, why, policy, decision, ours_karpenter)
        return CostPlan("none", None, "not-replicaset" if not pod.replicaset_owned else "no-policy")
    if not pod.scheduled:
        # The ReplicaSet controller deletes unassigned pods first whatever their cost, and
        # the node-based signals are still unknown: a write now would be wasted, and its
        # rate limit would then delay the real cost once the pod is bound.
        return CostPlan("none", None, "unscheduled", policy, decision)
    if decision.final is None:
        return CostPlan("none", None, "held", policy, decision)
    desired = str(decision.final)
    karpenter = None if decision.karpenter is None else str(decision.karpenter)
    if pod.karpenter_gate:
        return _yield(pod, policy, spec, decision, karpenter)
    foreign = pod.current is not None and not pod.ours
    foreign_karpenter = (
        karpenter is not None and pod.karpenter_current is not None and not pod.karpenter_ours
    )
    if (foreign or foreign_karpenter) and not spec.take_over:
        return CostPlan("none", None, "foreign-cost", policy, decision)
    if pod.current == desired and (karpenter is None or pod.karpenter_current == karpenter):
        return CostPlan("none", None, "unchanged", policy, decision)
    return CostPlan("write", desired, "changed", policy, decision, karpenter)


def _yield(
    pod: PodCostState,
    policy: str,
    spec: DeletionCost,
    decision: CostDecision,
    karpenter: str | None,
) -> CostPlan:
    """Karpenter's gate owns pod-deletion-cost on this pod: neither a first write nor a
    write after the gate deleted it, and takeOver does not change that (the gate would undo
    it every cycle). The policy's karpenter.sh/disruption-cost, which the gate ranks by, is
    still written, on the usual terms."""
    reason: PlanReason = karpenter_gate.PLAN_REASON
    if karpenter is None or pod.karpenter_current == karpenter:
        return CostPlan("none", None, reason, policy, decision, yields=True)
    if pod.karpenter_current is not None and not pod.karpenter_ours and not spec.take_over:
        return CostPlan("none", None, "foreign-cost", policy, decision, yields=True)
    return CostPlan("write", None, reason, policy, decision, karpenter, yields=True)
