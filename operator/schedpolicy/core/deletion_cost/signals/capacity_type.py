"""CapacityType: points by the capacity type of the pod's node. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import Field

from schedpolicy.core.deletion_cost.signals.base import PodFacts, Score, SignalKind
from schedpolicy.core.policy.model import Model, Points
from schedpolicy.core.wellknown import EKS_CAPACITY_LABEL, KARPENTER_CAPACITY_LABEL

_CAPACITY_VALUES = {
    KARPENTER_CAPACITY_LABEL: {"spot": "spot", "on-demand": "on-demand", "reserved": "reserved"},
    EKS_CAPACITY_LABEL: {"SPOT": "spot", "ON_DEMAND": "on-demand"},
}


class CapacityTypeSignal(Model):
    """Points by the capacity type of the pod's node, read from `karpenter.sh/capacity-type`
    (spot, on-demand, reserved) or `eks.amazonaws.com/capacityType` (SPOT, ON_DEMAND).
    Nodes with neither label, or an unknown value, get 0."""

    spot: Points = Field(default=0, description="Points for pods on spot nodes (usually negative).")
    on_demand: Points = Field(default=0, description="Points for pods on on-demand nodes.")
    reserved: Points = Field(
        default=0, description="Points for pods on reserved-capacity nodes (Karpenter only)."
    )


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


def score(params: CapacityTypeSignal, facts: PodFacts, now: datetime) -> Score:
    if facts.node_name is None:
        return Score(0, "the pod is not on a node yet")
    kind, source = capacity_type(facts.node_labels)
    points = {"spot": params.spot, "on-demand": params.on_demand, "reserved": params.reserved}
    if kind is None:
        return Score(0, f"node {facts.node_name} has an unknown capacity type ({source})")
    return Score(points[kind], f"node {facts.node_name} is {kind} ({source})")


KIND = SignalKind(
    "CapacityType", "capacityType", CapacityTypeSignal, score, node_fields=("labels",)
)
