"""The deletion cost's part of the SchedulingPolicy API: the signals, their sum and bounds,
and Karpenter's disruption cost."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from schedpolicy.core.consolidation.api import NodeConsolidationSignal
from schedpolicy.core.policy.model import (
    MAX_POINTS,
    Int32,
    Model,
    Points,
    cel,
    validations,
)

SignalType = Literal["CapacityType", "NodeConsolidation", "ZoneBalance", "PodCondition", "Metric"]
SIGNAL_MEMBERS: dict[str, str] = {
    "CapacityType": "capacityType",
    "NodeConsolidation": "nodeConsolidation",
    "ZoneBalance": "zoneBalance",
    "PodCondition": "podCondition",
    "Metric": "metric",
}
# Signals whose parameters all have defaults, so the member may be left out.
OPTIONAL_PARAMETERS = {"NodeConsolidation", "ZoneBalance"}


class CapacityTypeSignal(Model):
    """Points by the capacity type of the pod's node, read from `karpenter.sh/capacity-type`
    (spot, on-demand, reserved) or `eks.amazonaws.com/capacityType` (SPOT, ON_DEMAND).
    Nodes with neither label, or an unknown value, get 0."""

    spot: Points = Field(default=0, description="Points for pods on spot nodes (usually negative).")
    on_demand: Points = Field(default=0, description="Points for pods on on-demand nodes.")
    reserved: Points = Field(
        default=0, description="Points for pods on reserved-capacity nodes (Karpenter only)."
    )


class ZoneBalanceSignal(Model):
    """Lower cost for pods in zones that hold more of their ReplicaSet's pods than the
    least-filled eligible zone (a zone of Ready, schedulable nodes; a zone with 0 pods counts).
    Pods rank by age within their zone; a pod at position k (1-based) in a zone whose
    least-filled peer holds m pods gets pointsPerExcessPod x max(0, k - m). So a scale-down
    of any size takes the newest pods of whichever zone is fullest, and ends balanced."""

    points_per_excess_pod: Annotated[int, Field(ge=-MAX_POINTS, le=-1)] = Field(
        default=-100, description="Points per excess pod in the pod's zone; must be negative."
    )


class PodConditionSignal(Model):
    """Points while a named pod condition (for example a readiness gate such as
    `example.com/cache-warm`) is True. Never derived from elapsed time."""

    condition_type: Annotated[str, Field(min_length=1, max_length=316)] = Field(
        description="The pod condition type, for example example.com/cache-warm."
    )
    points: Points = Field(description="Points while the condition is True.")


class PrometheusSource(Model):
    """Scrape a Prometheus text endpoint on the pod's IP."""

    port: Annotated[int, Field(ge=1, le=65535)] = Field(description="Port on the pod.")
    path: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^/")] = Field(
        default="/metrics", description="HTTP path of the endpoint."
    )
    metric: Annotated[str, Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$", max_length=200)] = Field(
        description="Name of the gauge to read."
    )
    timeout_seconds: Annotated[float, Field(gt=0, le=5)] = Field(
        default=1.0, description="Bound on each scrape; a slower endpoint counts as no sample."
    )


class AnnotationSource(Model):
    """Read a JSON sample `{"value": ..., "observedAt": RFC3339, "podUID": ...}` from a pod
    annotation that the application (or a sidecar) keeps up to date."""

    key: Annotated[str, Field(min_length=1, max_length=317)] = Field(
        default="schedpolicy.io/metric", description="The annotation key holding the sample."
    )


class MetricBand(Model):
    min: Annotated[float, Field(ge=0)] = Field(
        description="Lower bound (inclusive) of the band: samples >= min get its points."
    )
    points: Points = Field(description="Points for samples in this band.")


class MetricSignal(Model):
    """Points by a per-pod gauge, such as active connections, mapped to bands. A sample that is
    stale, future-dated, not finite, negative or for another pod UID changes nothing: the
    pod keeps the cost it has."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.prometheus) != has(self.annotation)",
                "exactly one of prometheus and annotation must be set",
            ),
            cel(
                "self.bands.all(b, self.bands.exists_one(c, c.min == b.min))",
                "band minimums must be distinct",
                ".bands",
            ),
        )
    )

    prometheus: PrometheusSource | None = Field(
        default=None, description="Read the gauge from the pod's Prometheus endpoint."
    )
    annotation: AnnotationSource | None = Field(
        default=None, description="Read the gauge from a pod annotation."
    )
    max_age_seconds: Annotated[int, Field(ge=1, le=86_400)] = Field(
        default=60, description="Samples older than this are stale and ignored."
    )
    bands: list[MetricBand] = Field(
        min_length=1,
        max_length=32,
        description="Bands by lower bound; a sample gets the points of the highest band it reaches"
        " (0 below the lowest).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.prometheus is None) == (self.annotation is None):
            raise ValueError("exactly one of prometheus and annotation must be set")
        mins = [b.min for b in self.bands]
        if len(set(mins)) != len(mins):
            raise ValueError("band minimums must be distinct")
        return self


def _signal_rules() -> list[dict[str, str]]:
    rules = []
    for kind, member in SIGNAL_MEMBERS.items():
        if kind in OPTIONAL_PARAMETERS:
            rule = f"!has(self.{member}) || self.type == '{kind}'"
            message = f"{member} may only be set when type is {kind}"
        else:
            rule = f"(self.type == '{kind}') == has(self.{member})"
            message = f"{member} must be set when, and only when, type is {kind}"
        rules.append(cel(rule, message, f".{member}"))
    return rules


class Signal(Model):
    """One input to a pod's deletion cost. `type` names the signal, and the member of the same
    name (camelCase) holds its parameters; NodeConsolidation's and ZoneBalance's may be
    omitted, since all their parameters have defaults."""

    model_config = ConfigDict(json_schema_extra=validations(*_signal_rules()))

    type: SignalType = Field(description="Which signal this is.")
    capacity_type: CapacityTypeSignal | None = Field(
        default=None, description="Parameters for type CapacityType."
    )
    node_consolidation: NodeConsolidationSignal | None = Field(
        default=None, description="Parameters for type NodeConsolidation."
    )
    zone_balance: ZoneBalanceSignal | None = Field(
        default=None, description="Parameters for type ZoneBalance."
    )
    pod_condition: PodConditionSignal | None = Field(
        default=None, description="Parameters for type PodCondition."
    )
    metric: MetricSignal | None = Field(default=None, description="Parameters for type Metric.")

    @model_validator(mode="after")
    def _member_matches_type(self) -> Self:
        for kind, member in SIGNAL_MEMBERS.items():
            present = getattr(self, _snake(member)) is not None
            if kind in OPTIONAL_PARAMETERS:
                if present and self.type != kind:
                    raise ValueError(f"{member} may only be set when type is {kind}")
            elif present != (self.type == kind):
                raise ValueError(f"{member} must be set when, and only when, type is {kind}")
        return self

    def consolidation(self) -> NodeConsolidationSignal:
        return self.node_consolidation or NodeConsolidationSignal()

    def balance(self) -> ZoneBalanceSignal:
        return self.zone_balance or ZoneBalanceSignal()


def _snake(camel: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


# Karpenter's consolidation prices a pod at 1 + karpenter.sh/disruption-cost / 2^27, clamps
# that to [-10, 10], and counts a node's pods at no less than 0 each
# (sigs.k8s.io/karpenter pkg/utils/disruption: EvictionCost, ComputeRescheduleDisruptionCost).
# So the value written is (cost - min) x scale: never negative, where all negative costs would
# look alike to it, and at most 9 x 2^27, where the clamp would tie the highest.
KARPENTER_COST_DIVISOR = 2**27
KARPENTER_VALUE_MAX = 9 * KARPENTER_COST_DIVISOR
DEFAULT_KARPENTER_SCALE = 2**19


class KarpenterDisruptionCost(Model):
    """Also write `karpenter.sh/disruption-cost` (read by Karpenter v1.15 and later):
    (cost - min) x scale, so that Karpenter's consolidation orders nodes by what this policy
    decided. Karpenter divides it by 2^27: a pod-deletion-cost of -1000 to 1000 alone would
    move its per-pod cost by less than 0.00001, and a negative one would not count at all."""

    scale: Annotated[int, Field(ge=1, le=KARPENTER_VALUE_MAX)] = Field(
        default=DEFAULT_KARPENTER_SCALE,
        description="Multiplier from the deletion cost above min to karpenter.sh/disruption-cost."
        f" (max - min) x scale must be at most {KARPENTER_VALUE_MAX} (9 x 2^27), where Karpenter's"
        " clamp of its per-pod cost to 10 still leaves every cost apart.",
    )


class DeletionCost(Model):
    """How this policy computes `controller.kubernetes.io/pod-deletion-cost` for the
    ReplicaSet-owned pods it governs: cost = clamp(bucket(sum of signal points), min, max).
    The ReplicaSet controller removes lower-cost pods first when it scales down."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel("self.min <= self.max", "min must be less than or equal to max", ".min"),
            cel(
                "!has(self.karpenterDisruptionCost) || (self.max - self.min) *"
                f" self.karpenterDisruptionCost.scale <= {KARPENTER_VALUE_MAX}",
                f"(max - min) x scale must be at most {KARPENTER_VALUE_MAX},"
                " or Karpenter's clamp would tie the highest costs",
                ".karpenterDisruptionCost.scale",
            ),
        )
    )

    signals: list[Signal] = Field(
        min_length=1, max_length=16, description="The signals whose points are summed."
    )
    bucket: Annotated[int, Field(ge=1, le=MAX_POINTS)] = Field(
        default=100,
        description="The sum is rounded down to a multiple of this before clamping, so that small"
        " changes in a signal do not cause a write.",
    )
    min: Int32 = Field(default=-1000, description="Lowest cost written.")
    max: Int32 = Field(default=1000, description="Highest cost written.")
    take_over: bool = Field(
        default=False,
        description="Overwrite a deletion cost that someone else set. When false, such pods are"
        " left alone and counted.",
    )
    min_update_interval_seconds: Annotated[int, Field(ge=0, le=3600)] = Field(
        default=10, description="Minimum time between two cost writes to the same pod."
    )
    karpenter_disruption_cost: KarpenterDisruptionCost | None = Field(
        default=None,
        description="Opt in to writing karpenter.sh/disruption-cost beside the deletion cost,"
        " in the same write, so that Karpenter's consolidation sees this policy too.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min > self.max:
            raise ValueError("min must be less than or equal to max")
        karpenter = self.karpenter_disruption_cost
        if karpenter is not None and (self.max - self.min) * karpenter.scale > KARPENTER_VALUE_MAX:
            largest = KARPENTER_VALUE_MAX // max(self.max - self.min, 1)
            raise ValueError(
                f"karpenterDisruptionCost.scale: {karpenter.scale} maps [{self.min}, {self.max}]"
                f" to [0, {(self.max - self.min) * karpenter.scale}], above {KARPENTER_VALUE_MAX}"
                f" where Karpenter's clamp ties the highest costs; use a scale of at most {largest}"
            )
        return self

    def karpenter_value(self, cost: int) -> int | None:
        """The karpenter.sh/disruption-cost for a deletion cost, when the policy opts in."""
        karpenter = self.karpenter_disruption_cost
        return None if karpenter is None else (cost - self.min) * karpenter.scale
