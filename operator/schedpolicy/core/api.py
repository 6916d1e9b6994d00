"""The SchedulingPolicy API (schedpolicy.io/v1alpha1): the one source of the CRD schema.

Every field's description, default, bound and CEL rule lives here; `crd.py` turns
these models into the CustomResourceDefinition, and the operator parses objects
with the same models. CEL rules are attached with `cel(...)`, and the models
enforce the same rules in Python (`model_validator`s), so a policy that reached
the operator without the apiserver's validation is still refused, with the same
field path.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from schedpolicy.core.wellknown import SECONDARY_SCHEDULER

GROUP = "schedpolicy.io"
VERSION = "v1alpha1"
KIND = "SchedulingPolicy"
PLURAL = "schedulingpolicies"
SINGULAR = "schedulingpolicy"
SHORT_NAMES = ["spol"]
CATEGORIES = ["schedpolicy"]
API_VERSION = f"{GROUP}/{VERSION}"

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
DEFAULT_LABEL_PREFIX = "schedpolicy.io"

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One `x-kubernetes-validations` entry; `field_path` points the error at a child field."""
    entry = {"rule": rule, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    return entry


def validations(*rules: dict[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": list(rules)}


def is_reserved_label_domain(prefix: str) -> bool:
    """True for kubernetes.io, k8s.io and their subdomains, which we must never write."""
    return any(prefix == d or prefix.endswith("." + d) for d in RESERVED_LABEL_DOMAINS)


class Model(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    def wire(self) -> dict[str, Any]:
        """The Kubernetes form: camelCase, optional fields omitted rather than null."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# ---- selectors ---------------------------------------------------------------------------

LabelKey = Annotated[str, Field(min_length=1, max_length=317)]
LabelValue = Annotated[str, Field(max_length=63)]


class LabelSelectorRequirement(Model):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0)"
                " : (!has(self.values) || size(self.values) == 0)",
                "values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist",
                ".values",
            )
        )
    )

    key: LabelKey = Field(description="The label key the requirement applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the label's value relates to `values`."
    )
    values: list[LabelValue] | None = Field(
        default=None,
        max_length=64,
        description="Values for In and NotIn; must be empty for Exists and DoesNotExist.",
    )

    @model_validator(mode="after")
    def _values_match_operator(self) -> Self:
        wants_values = self.operator in ("In", "NotIn")
        if wants_values != bool(self.values):
            raise ValueError(
                "values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist"
            )
        return self


class LabelSelector(Model):
    """A Kubernetes label selector. An empty selector matches every object."""

    match_labels: dict[LabelKey, LabelValue] | None = Field(
        default=None,
        max_length=64,
        description="Labels that must all be present with exactly these values.",
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None,
        max_length=32,
        description="Requirements that must all hold (ANDed with matchLabels).",
    )


# ---- deletion cost -----------------------------------------------------------------------

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
# Up to 2^30 either way, so that costs can reach the scale at which Karpenter's
# consolidation notices them (it divides the cost by 2^27).
MAX_POINTS = 2**30
Points = Annotated[int, Field(ge=-MAX_POINTS, le=MAX_POINTS)]


class CapacityTypeSignal(Model):
    """Points by the capacity type of the pod's node, read from `karpenter.sh/capacity-type`
    (spot, on-demand, reserved) or `eks.amazonaws.com/capacityType` (SPOT, ON_DEMAND).
    Nodes with neither label, or an unknown value, get 0."""

    spot: Points = Field(default=0, description="Points for pods on spot nodes (usually negative).")
    on_demand: Points = Field(default=0, description="Points for pods on on-demand nodes.")
    reserved: Points = Field(
        default=0, description="Points for pods on reserved-capacity nodes (Karpenter only)."
    )


# A resource name as the API spells it: `cpu`, `memory`, `hugepages-2Mi`, or an extended
# resource with its domain (`nvidia.com/gpu`). RE2 and Python read this pattern alike.
RESOURCE_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
MAX_CONSOLIDATION_RESOURCES = 4
ResourceName = Annotated[str, Field(min_length=1, max_length=317)]
MAX_DEVICE_CLASSES = 8
GPU_RESOURCE_NAME = "nvidia.com/gpu"
DeviceClassName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]


class NodeConsolidationSignal(Model):
    """Points that rise with how full the pod's node is: `floor(points * fill)`. Fill is the
    dominant share: the largest, over `resources`, of what the node's non-terminal,
    non-DaemonSet pods request over what the node has allocatable, capped at 1. A resource the
    node does not advertise (a CPU node for nvidia.com/gpu) is skipped for that node, and a node
    that advertises none of them counts as empty. Pods on the emptiest nodes get the fewest
    points and go first, which lets those nodes be consolidated: list nvidia.com/gpu to free
    whole GPU nodes rather than the CPU-emptiest ones."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "!has(self.deviceClasses) || size(self.deviceClasses) == 0 ||"
                " self.resources.exists(r, r == (has(self.deviceResource) ? self.deviceResource"
                f" : '{GPU_RESOURCE_NAME}'))",
                "deviceResource must be one of resources when deviceClasses are listed",
                ".deviceResource",
            )
        )
    )

    points: Annotated[int, Field(ge=1, le=MAX_POINTS)] = Field(
        default=500, description="Points for a pod on a completely full node."
    )
    resources: list[ResourceName] = Field(
        default_factory=lambda: ["cpu"],
        min_length=1,
        max_length=MAX_CONSOLIDATION_RESOURCES,
        description="Resources whose share of the node makes its fill, the largest share winning"
        " (default [cpu]). Any resource name is valid, extended ones included"
        " (nvidia.com/gpu, amd.com/gpu); at most 4, none twice.",
        json_schema_extra=validations(
            cel(
                f"self.all(r, r.matches('{RESOURCE_NAME}'))",
                "each resource must be a resource name such as cpu, memory or nvidia.com/gpu",
            ),
            cel("self.all(r, self.exists_one(s, s == r))", "resources must not repeat"),
        ),
    )

    @field_validator("resources")
    @classmethod
    def _resource_names(cls, resources: list[str]) -> list[str]:
        for index, name in enumerate(resources):
            if not re.match(RESOURCE_NAME, name):
                raise ValueError(
                    f"item {index}, {name!r}, is not a resource name such as cpu, memory"
                    " or nvidia.com/gpu"
                )
        if len(set(resources)) != len(resources):
            raise ValueError("resources must not repeat")
        return resources

    device_classes: list[DeviceClassName] = Field(
        default_factory=list,
        max_length=MAX_DEVICE_CLASSES,
        description="DRA DeviceClasses whose devices join the share of `deviceResource`: a"
        " node's devices that these classes select (from its ResourceSlices) add to what it has,"
        " and those that ResourceClaims hold add to what is requested. A claim the scheduler"
        " made for an extended-resource request is not counted again, since the pod's request"
        " already is. Empty (the default): DRA devices are not counted.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    device_resource: ResourceName = Field(
        default=GPU_RESOURCE_NAME,
        description="The resource in `resources` whose share the DeviceClasses' devices join"
        " (default nvidia.com/gpu).",
    )

    @model_validator(mode="after")
    def _device_resource_listed(self) -> Self:
        if self.device_classes and self.device_resource not in self.resources:
            raise ValueError(
                f"deviceResource {self.device_resource} must be one of resources"
                f" ({', '.join(self.resources)}) when deviceClasses are listed"
            )
        return self


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


Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]


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


# ---- GPU node labels ---------------------------------------------------------------------

GPUSource = Literal["Inventory", "GPUFeatureDiscovery", "DRA", "InstanceType"]
DEFAULT_GPU_SOURCES: tuple[GPUSource, ...] = (
    "Inventory",
    "GPUFeatureDiscovery",
    "DRA",
    "InstanceType",
)
GPUModel = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=63)
]


class InventoryEntry(Model):
    """GPU facts an admin verified for the nodes that match `nodeSelector`."""

    node_selector: LabelSelector = Field(description="Nodes this entry describes.")
    model: GPUModel = Field(description="Short GPU model, for example A100 or H100.")
    memory_mib: Annotated[int, Field(ge=1, le=10_000_000)] = Field(
        alias="memoryMiB", description="Memory per GPU device in MiB (the smallest device's)."
    )


class GPULabels(Model):
    """Keep `<labelPrefix>/gpu-model` and `<labelPrefix>/gpu-memory-mib` on GPU nodes (nodes whose
    status.allocatable has nvidia.com/gpu > 0, or whose ResourceSlices publish gpu.nvidia.com
    devices), from the first source in `sources` that knows
    the node."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                f"self.labelPrefix.matches('{DNS_SUBDOMAIN}')",
                "labelPrefix must be a DNS subdomain, such as schedpolicy.io",
                ".labelPrefix",
            ),
            cel(
                " && ".join(
                    f"self.labelPrefix != '{d}' && !self.labelPrefix.endsWith('.{d}')"
                    for d in RESERVED_LABEL_DOMAINS
                ),
                "labelPrefix must not be kubernetes.io, k8s.io or a subdomain of them",
                ".labelPrefix",
            ),
        )
    )

    label_prefix: Annotated[str, Field(min_length=1, max_length=253)] = Field(
        default=DEFAULT_LABEL_PREFIX,
        description="Prefix of the labels written; never kubernetes.io or k8s.io.",
    )
    sources: list[GPUSource] = Field(
        default_factory=lambda: list(DEFAULT_GPU_SOURCES),
        min_length=1,
        max_length=4,
        description="Where GPU facts come from, first match wins: Inventory (entries below),"
        " GPUFeatureDiscovery (NVIDIA GFD's nvidia.com/gpu.product and nvidia.com/gpu.memory),"
        " DRA (the productName attribute and memory capacity of the gpu.nvidia.com devices the"
        " node's ResourceSlices publish, or their MIG profile),"
        " InstanceType (a built-in table of EC2 instance types). A source whose input would"
        " make the labels lie (memory in no plausible unit, an invalid MIG state, more devices"
        " than the instance type has cards) refuses, and the node's GPULabelRefused Event says"
        " why.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    inventory: list[InventoryEntry] | None = Field(
        default=None, max_length=256, description="Verified GPU facts per node selector."
    )
    node_selector: LabelSelector | None = Field(
        default=None, description="Only nodes matching this selector are labelled (default: all)."
    )
    allow_overwrite: bool = Field(
        default=False,
        description="Replace a label of ours that someone else set to another value. When false,"
        " the label is left alone and the conflict is reported.",
    )

    @model_validator(mode="after")
    def _checks(self) -> Self:
        if not re.match(DNS_SUBDOMAIN, self.label_prefix):
            raise ValueError("labelPrefix must be a DNS subdomain, such as schedpolicy.io")
        if is_reserved_label_domain(self.label_prefix):
            raise ValueError("labelPrefix must not be kubernetes.io, k8s.io or a subdomain of them")
        if len(set(self.sources)) != len(self.sources):
            raise ValueError("sources must not repeat")
        return self


class NodeLabels(Model):
    """Node labels the operator keeps. It only ever changes labels it set itself."""

    gpu: GPULabels = Field(description="GPU model and per-device memory labels.")


# ---- placement ---------------------------------------------------------------------------

Weight = Annotated[int, Field(ge=1, le=100)]


class GPUPlacement(Model):
    """Required node affinity added to pods that request nvidia.com/gpu."""

    models: list[GPUModel] = Field(
        min_length=1, max_length=32, description="Acceptable GPU models, for example [A100, H100]."
    )
    min_memory_mib: Annotated[int, Field(gt=0, le=10_000_000)] = Field(
        alias="minMemoryMiB", description="Minimum memory per GPU in MiB."
    )


class CapacityTypePreference(Model):
    prefer: Literal["spot", "on-demand"] = Field(description="Capacity type to prefer.")
    weight: Weight = Field(default=50, description="Preference weight, 1..100.")


class InstanceTypePreference(Model):
    prefix: Annotated[str, Field(min_length=1, max_length=63)] = Field(
        description="Instance-type prefix, for example p5 or g6e."
    )
    weight: Weight = Field(description="Preference weight, 1..100.")


class ZoneSpread(Model):
    max_skew: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=1, description="maxSkew of the topologySpreadConstraint."
    )
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = Field(
        default="ScheduleAnyway", description="whenUnsatisfiable of the topologySpreadConstraint."
    )


class Placement(Model):
    """Hints added to matching pods at admission (CREATE only). Placement itself is left to
    the kube-scheduler profile named by `schedulerName`."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                f"self.schedulerName.matches('{DNS_LABEL}')",
                "schedulerName must be a DNS-1123 name",
                ".schedulerName",
            ),
            cel(
                "self.schedulerName != 'default-scheduler'",
                "schedulerName must name the secondary scheduler, not default-scheduler",
                ".schedulerName",
            ),
        )
    )

    scheduler_name: Annotated[str, Field(min_length=1, max_length=63)] = Field(
        default=SECONDARY_SCHEDULER,
        description="spec.schedulerName given to matching pods whose schedulerName is empty or"
        " default-scheduler. An explicit other scheduler is never overridden.",
    )
    gpu: GPUPlacement | None = Field(default=None, description="GPU model and memory requirements.")
    capacity_type: CapacityTypePreference | None = Field(
        default=None, description="Preferred capacity type."
    )
    instance_types: list[InstanceTypePreference] | None = Field(
        default=None, max_length=32, description="Preferred instance-type prefixes."
    )
    avoid_gpu_nodes: bool = Field(
        default=False,
        alias="avoidGPUNodes",
        description="Prefer nodes without GPUs for pods that request none.",
    )
    zone_spread: ZoneSpread | None = Field(
        default=None,
        description=(
            "Spread the pod's owner (ReplicaSet, StatefulSet, Job) over zones, selecting the"
            " labels its pods share."
        ),
    )

    @model_validator(mode="after")
    def _scheduler(self) -> Self:
        if not re.match(DNS_LABEL, self.scheduler_name):
            raise ValueError("schedulerName must be a DNS-1123 name")
        if self.scheduler_name == "default-scheduler":
            raise ValueError(
                "schedulerName must name the secondary scheduler, not default-scheduler"
            )
        return self


# ---- the policy --------------------------------------------------------------------------


class SchedulingPolicySpec(Model):
    """What a SchedulingPolicy asks for. At least one of deletionCost, nodeLabels and placement
    must be set. A pod is governed by the matching policy with the highest priority; on a tie
    the policy whose name sorts first wins, and both are reported as Conflicting."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.deletionCost) || has(self.nodeLabels) || has(self.placement)",
                "at least one of deletionCost, nodeLabels and placement must be set",
            ),
        )
    )

    priority: Int32 = Field(default=0, description="Higher wins when policies overlap.")
    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="Namespaces whose pods this policy governs (default: all namespaces).",
    )
    pod_selector: LabelSelector | None = Field(
        default=None,
        description="Pods this policy governs (default: all pods in those namespaces).",
    )
    deletion_cost: DeletionCost | None = Field(
        default=None, description="Keep pod-deletion-cost on ReplicaSet-owned pods."
    )
    node_labels: NodeLabels | None = Field(default=None, description="Keep labels on nodes.")
    placement: Placement | None = Field(
        default=None, description="Add placement hints at admission."
    )

    @model_validator(mode="after")
    def _something(self) -> Self:
        if self.deletion_cost is None and self.node_labels is None and self.placement is None:
            raise ValueError("at least one of deletionCost, nodeLabels and placement must be set")
        return self


ConditionType = Literal["Ready", "Conflicting", "Degraded", "Compiled", "Provisionable"]


class Condition(Model):
    type: ConditionType = Field(
        description="Ready, Conflicting, Degraded, Compiled (placement policies: whether"
        " a MutatingAdmissionPolicy in the apiserver serves the hints, rather than the webhook),"
        " or Provisionable (placement.gpu: whether a labelled node or an instance type a node"
        " autoscaler can launch holds the GPUs asked for)."
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: Annotated[str, Field(max_length=1024)] = Field(
        description="CamelCase reason for the last transition."
    )
    message: Annotated[str, Field(max_length=32768)] = Field(
        default="", description="Human-readable detail."
    )
    last_transition_time: str = Field(
        description="When the status last changed (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the condition was computed for."
    )


class StatusSummary(Model):
    """The status as `kubectl get` shows it: text, so that a count that does not apply to
    this policy reads `-` instead of a blank."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    matched: str | None = Field(default=None, max_length=16, description="matchedPods, or -.")
    costed: str | None = Field(default=None, max_length=16, description="costedPods, or -.")
    nodes: str | None = Field(default=None, max_length=16, description="labeledNodes, or -.")
    reason: str | None = Field(
        default=None,
        max_length=128,
        description="The reason of the first condition not in its healthy state, or -.",
    )


class AdmissionStatus(Model):
    """Which admission path injects this policy's placement hints."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    path: Literal["MutatingAdmissionPolicy", "Webhook"] = Field(
        description="MutatingAdmissionPolicy (in the apiserver, no network hop) or Webhook."
    )
    reason: str = Field(max_length=128, description="Why this path (the Compiled reason).")
    policy_object: str | None = Field(
        default=None,
        max_length=253,
        description="The MutatingAdmissionPolicy serving this policy, on that path.",
    )


class SchedulingPolicyStatus(Model):
    """What the operator observed and did for this policy. Written only by the operator."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation last reconciled."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        max_length=8,
        description="Ready, Conflicting, Degraded, and Compiled for placement policies.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    matched_pods: int | None = Field(
        default=None, ge=0, description="Pods this policy governs now."
    )
    costed_pods: int | None = Field(
        default=None, ge=0, description="Governed pods that carry the cost this policy computes."
    )
    labeled_nodes: int | None = Field(
        default=None, ge=0, description="Nodes carrying the labels this policy computes."
    )
    summary: StatusSummary | None = Field(
        default=None, description="The counts and the first problem, as text for kubectl get."
    )
    admission: AdmissionStatus | None = Field(
        default=None, description="Placement policies: the admission path of the hints."
    )
    last_reconcile_time: str | None = Field(
        default=None,
        description="When the operator last reconciled this policy (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )


class SpecError(ValueError):
    """A spec that fails validation, as `<field path>: <reason>` lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def field_path(loc: tuple[int | str, ...], root: str = "spec") -> str:
    path = root
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not part.startswith(("function-", "model-")):
            path += f".{part}"
    return path


def parse_spec(raw: Any) -> SchedulingPolicySpec:
    """Validate a spec as stored by the apiserver; errors name the field path."""
    try:
        return SchedulingPolicySpec.model_validate(raw)
    except ValidationError as err:
        problems = [
            f"{field_path(e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in err.errors()
        ]
        raise SpecError(problems) from None
