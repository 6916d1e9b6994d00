"""The GPU labels' part of the SchedulingPolicy API: where GPU facts come from, and which
nodes get the labels."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from schedpolicy.core.policy.model import (
    DEFAULT_LABEL_PREFIX,
    DNS_SUBDOMAIN,
    RESERVED_LABEL_DOMAINS,
    LabelSelector,
    Model,
    cel,
    is_reserved_label_domain,
    validations,
)

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
