"""A pod's deletion cost from its signals. Pure.

    cost = clamp(bucket(sum of signal points), min, max)

`bucket` rounds down to a multiple of `deletionCost.bucket` (towards minus
infinity, so -150 becomes -200 with bucket 100), which keeps small signal
changes from causing writes. The decision keeps every intermediate value and
says in words how each was reached, for `schedpolicy explain`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from schedpolicy.core.consolidation import fill
from schedpolicy.core.consolidation.api import NodeConsolidationSignal
from schedpolicy.core.consolidation.fill import NodeFill
from schedpolicy.core.deletion_cost import karpenter_gate
from schedpolicy.core.deletion_cost.api import (
    KARPENTER_COST_DIVISOR,
    CapacityTypeSignal,
    DeletionCost,
    MetricSignal,
    PodConditionSignal,
    Signal,
    ZoneBalanceSignal,
)
from schedpolicy.core.deletion_cost.samples import Rejection, Sample, check
from schedpolicy.core.gpu.dra import DeviceShare
from schedpolicy.core.wellknown import EKS_CAPACITY_LABEL, KARPENTER_CAPACITY_LABEL, ZONE_LABEL

_CAPACITY_VALUES = {
    KARPENTER_CAPACITY_LABEL: {"spot": "spot", "on-demand": "on-demand", "reserved": "reserved"},
    EKS_CAPACITY_LABEL: {"SPOT": "spot", "ON_DEMAND": "on-demand"},
}


@dataclass(frozen=True)
class CostInputs:
    """What the signals read about one pod, gathered from the cluster view."""

    node_name: str | None = None
    node_labels: Mapping[str, str] = field(default_factory=dict)
    # Milli-units per resource name (millicores for cpu, thousandths of a byte for memory),
    # so that any two amounts of one resource divide exactly.
    node_allocatable: Mapping[str, int] = field(default_factory=dict)
    node_requested: Mapping[str, int] = field(default_factory=dict)
    # The pod's ReplicaSet's active pods per zone, with every eligible zone present (maybe 0).
    zone_counts: Mapping[str, int] = field(default_factory=dict)
    eligible_zones: frozenset[str] = frozenset()
    zone_rank: int | None = None  # 0-based position of the pod in its zone, oldest first
    conditions: Mapping[str, str] = field(default_factory=dict)  # pod condition type -> status
    samples: Mapping[int, Sample | Rejection] = field(default_factory=dict)  # by signal index
    pod_uid: str = ""
    # The node's DRA devices of each NodeConsolidation signal's deviceClasses, by signal index.
    device_shares: Mapping[int, DeviceShare] = field(default_factory=dict)


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


def capacity_type(labels: Mapping[str, str]) -> tuple[str | None, str]:
    """The node's capacity type (spot, on-demand, reserved) and the label it came from."""
    found = [
        (k, labels[k], _CAPACITY_VALUES[k].get(labels[k])) for k in _CAPACITY_VALUES if k in labels
    ]
    if not found:
        return None, "no capacity-type label"
    key, value, kind = found[0]  # Karpenter's label first: it is the one Karpenter acts on
    source = f"{key}={value}"
    overridden = [f"{k}={v}" for k, v, other in found[1:] if other != kind]
    if overridden:
        source += f", over the disagreeing {', '.join(overridden)}"
    return kind, source


def _capacity(params: CapacityTypeSignal, inputs: CostInputs) -> tuple[int, str]:
    if inputs.node_name is None:
        return 0, "the pod is not on a node yet"
    kind, source = capacity_type(inputs.node_labels)
    points = {"spot": params.spot, "on-demand": params.on_demand, "reserved": params.reserved}
    if kind is None:
        return 0, f"node {inputs.node_name} has an unknown capacity type ({source})"
    return points[kind], f"node {inputs.node_name} is {kind} ({source})"


def consolidation(
    params: NodeConsolidationSignal, inputs: CostInputs, index: int = 0
) -> tuple[int, str, NodeFill | None]:
    """NodeConsolidation's points, in words, and the shares they came from."""
    share = inputs.device_shares.get(index) if params.device_classes else None
    return fill.points(
        params, inputs.node_name, inputs.node_allocatable, inputs.node_requested, share
    )


def _zone_balance(params: ZoneBalanceSignal, inputs: CostInputs) -> tuple[int, str]:
    zone = inputs.node_labels.get(ZONE_LABEL) if inputs.node_name else None
    if zone is None:
        return 0, "the pod's node has no zone"
    if not inputs.eligible_zones:
        return 0, "no eligible zones"
    here = inputs.zone_counts.get(zone, 0)
    counts = {z: inputs.zone_counts.get(z, 0) for z in inputs.eligible_zones}
    least_zone = min(counts, key=lambda z: (counts[z], z))
    least = counts[least_zone]
    # The pod's place in its zone (oldest first) says how far above the least-filled zone it
    # stands: the newest pods of the most crowded zone score lowest, so a scale-down of any
    # size takes pods from whichever zone is fullest at each step and ends balanced.
    rank = inputs.zone_rank if inputs.zone_rank is not None else here - 1
    excess = max(0, rank + 1 - least)
    return params.points_per_excess_pod * excess, (
        f"zone {zone} holds {here} of the ReplicaSet's pods, the least-filled eligible zone"
        f" ({least_zone}) {least}; this pod is number {rank + 1} in its zone by age:"
        f" {excess} above it x {params.points_per_excess_pod}"
    )


def _condition(params: PodConditionSignal, inputs: CostInputs) -> tuple[int, str]:
    status = inputs.conditions.get(params.condition_type)
    if status == "True":
        return params.points, f"condition {params.condition_type} is True"
    return 0, f"condition {params.condition_type} is {status or 'absent'}"


def band_points(params: MetricSignal, value: float) -> tuple[int, str]:
    reached = [b for b in params.bands if value >= b.min]
    if not reached:
        return 0, "below the lowest band"
    band = max(reached, key=lambda b: b.min)
    return band.points, f"band >= {band.min:g}"


def _metric(
    params: MetricSignal, found: Sample | Rejection | None, inputs: CostInputs, now: datetime
) -> tuple[int, str] | Rejection:
    if found is None:
        return Rejection("no-sample", "no sample has been read yet")
    if isinstance(found, Rejection):
        return found
    rejected = check(found, inputs.pod_uid, now, timedelta(seconds=params.max_age_seconds))
    if rejected is not None:
        return rejected
    points, band = band_points(params, found.value)
    name = params.prometheus.metric if params.prometheus else "sample"
    return points, f"{name} = {found.value:g} ({band})"


def signal_points(
    index: int, signal: Signal, inputs: CostInputs, now: datetime
) -> SignalPoints | Rejection:
    kind = signal.type
    if signal.capacity_type is not None:
        return SignalPoints(kind, *_capacity(signal.capacity_type, inputs))
    if kind == "NodeConsolidation":
        params = signal.consolidation()
        points, detail, fill = consolidation(params, inputs, index)
        devices = inputs.device_shares.get(index) if params.device_classes else None
        return SignalPoints(kind, points, detail, fill, devices)
    if kind == "ZoneBalance":
        return SignalPoints(kind, *_zone_balance(signal.balance(), inputs))
    if signal.pod_condition is not None:
        return SignalPoints(kind, *_condition(signal.pod_condition, inputs))
    assert signal.metric is not None
    found = _metric(signal.metric, inputs.samples.get(index), inputs, now)
    return found if isinstance(found, Rejection) else SignalPoints(kind, *found)


def bucket_down(value: int, bucket: int) -> int:
    return (value // bucket) * bucket


def decide(spec: DeletionCost, inputs: CostInputs, now: datetime) -> CostDecision:
    parts: list[SignalPoints] = []
    hold: Rejection | None = None
    for index, signal in enumerate(spec.signals):
        result = signal_points(index, signal, inputs, now)
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
