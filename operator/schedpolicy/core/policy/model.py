"""What every part of the SchedulingPolicy API is made of: the model base (camelCase on the
wire, unknown fields refused), CEL rules attached to the schema, label selectors, and the
shared number and name types. Pure."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

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


# Up to 2^30 either way, so that costs can reach the scale at which Karpenter's
# consolidation notices them (it divides the cost by 2^27).
MAX_POINTS = 2**30
Points = Annotated[int, Field(ge=-MAX_POINTS, le=MAX_POINTS)]

Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
