"""The deletion cost's part of the SchedulingPolicy API: the signals, their sum and bounds,
and Karpenter's disruption cost."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self, cast

from pydantic import ConfigDict, Field, model_validator

from schedpolicy.core.deletion_cost.signals.base import SignalKind
from schedpolicy.core.deletion_cost.signals.registry import SIGNALS
from schedpolicy.core.policy.model import (
    MAX_POINTS,
    Int32,
    Model,
    cel,
    validations,
)

# The signals' names and parameters come from the registry (signals/registry.py): one
# definition per signal, from which the CRD's enum, members and rules are derived here.
SignalType = Literal[tuple(kind.name for kind in SIGNALS)]  # type: ignore[valid-type]


def _snake(camel: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


def _member_rule(kind: SignalKind[Any]) -> tuple[str, str]:
    """The CEL rule and message tying a signal's member to its type."""
    if kind.optional:
        rule = f"!has(self.{kind.member}) || self.type == '{kind.name}'"
        return rule, f"{kind.member} may only be set when type is {kind.name}"
    rule = f"(self.type == '{kind.name}') == has(self.{kind.member})"
    return rule, f"{kind.member} must be set when, and only when, type is {kind.name}"


class SignalBase(Model):
    """What every Signal model has, whatever signals it was built from (signal_model)."""

    kinds: ClassVar[tuple[SignalKind[Any], ...]] = ()
    # By type: the kind, its member's attribute, and its defaults where the member may be left
    # out. Resolved once per model, not once per pod scored.
    by_type: ClassVar[dict[str, tuple[SignalKind[Any], str, Any]]] = {}
    if TYPE_CHECKING:
        type: str

    @model_validator(mode="after")
    def _member_matches_type(self) -> Self:
        for kind, member, _ in self.by_type.values():
            present = getattr(self, member) is not None
            if present and kind.optional and self.type != kind.name:
                raise ValueError(_member_rule(kind)[1])
            if not kind.optional and present != (self.type == kind.name):
                raise ValueError(_member_rule(kind)[1])
        return self

    def kind(self) -> SignalKind[Any]:
        return self.by_type[self.type][0]

    def params(self) -> Any:
        """This signal's parameters: its member, or the defaults where it may be left out
        (one instance, shared: parameters are frozen)."""
        kind, member, defaults = self.by_type[self.type]
        value = getattr(self, member)
        if value is not None:
            return value
        return defaults if defaults is not None else kind.params()


SIGNAL_DOC = (
    "One input to a pod's deletion cost. `type` names the signal, and the member of the same\n"
    "    name (camelCase) holds its parameters; NodeConsolidation's and ZoneBalance's may be\n"
    "    omitted, since all their parameters have defaults."
)


def signal_model(kinds: tuple[SignalKind[Any], ...]) -> type[SignalBase]:
    """The Signal model for these signals: `type` one of their names, and a member each."""
    names = tuple(kind.name for kind in kinds)
    annotations: dict[str, Any] = {"type": Literal[names]}
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": SIGNAL_DOC,
        "__qualname__": "Signal",
        "kinds": kinds,
        "by_type": {
            kind.name: (kind, _snake(kind.member), kind.params() if kind.optional else None)
            for kind in kinds
        },
        "model_config": ConfigDict(
            json_schema_extra=validations(
                *(cel(*_member_rule(kind), f".{kind.member}") for kind in kinds)
            )
        ),
        "type": Field(description="Which signal this is."),
    }
    for kind in kinds:
        name = _snake(kind.member)
        annotations[name] = kind.params | None
        namespace[name] = Field(default=None, description=f"Parameters for type {kind.name}.")
    namespace["__annotations__"] = annotations
    # pydantic's metaclass builds the model from the namespace as it would a class body.
    metaclass: Any = type(SignalBase)
    return cast("type[SignalBase]", metaclass("Signal", (SignalBase,), namespace))


if TYPE_CHECKING:
    Signal = SignalBase
else:
    Signal = signal_model(SIGNALS)


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
