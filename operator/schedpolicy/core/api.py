"""The SchedulingPolicy API (schedpolicy.io/v1alpha1), assembled: the one source of the CRD
schema.

Every field's description, default, bound and CEL rule lives here; `crd.py` turns
these models into the CustomResourceDefinition, and the operator parses objects
with the same models. CEL rules are attached with `cel(...)`, and the models
enforce the same rules in Python (`model_validator`s), so a policy that reached
the operator without the apiserver's validation is still refused, with the same
field path.

Each capability's part of the spec lives beside that capability (deletion_cost/api.py,
consolidation/api.py, gpu/api.py, placement/api.py); this module puts them together with
the envelope: the names, the spec, the status and parsing.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from schedpolicy.core.deletion_cost.api import DeletionCost
from schedpolicy.core.gpu.api import NodeLabels
from schedpolicy.core.placement.api import Placement
from schedpolicy.core.policy.model import Int32, LabelSelector, Model, cel, validations

GROUP = "schedpolicy.io"
VERSION = "v1alpha1"
KIND = "SchedulingPolicy"
PLURAL = "schedulingpolicies"
SINGULAR = "schedulingpolicy"
SHORT_NAMES = ["spol"]
CATEGORIES = ["schedpolicy"]
API_VERSION = f"{GROUP}/{VERSION}"


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


ConditionType = Literal["Ready", "Conflicting", "Degraded", "Compiled", "Provisionable", "Yielding"]


class Condition(Model):
    type: ConditionType = Field(
        description="Ready, Conflicting, Degraded, Compiled (placement policies: whether"
        " a MutatingAdmissionPolicy in the apiserver serves the hints, rather than the webhook),"
        " Provisionable (placement.gpu: whether a labelled node or an instance type a node"
        " autoscaler can launch holds the GPUs asked for), or Yielding (deletionCost: the"
        " pod-deletion-cost this policy leaves to another writer by design, such as"
        " Karpenter's PodDeletionCostManagement gate on the pods of its nodes)."
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
