"""The NodeConsolidation signal's parameters: which resources (and DRA device classes)
make a node's fill. Part of the SchedulingPolicy API (the deletion cost's signals)."""

from __future__ import annotations

import re
from typing import Annotated, Self

from pydantic import ConfigDict, Field, field_validator, model_validator

from schedpolicy.core.policy.model import (
    DNS_SUBDOMAIN,
    MAX_POINTS,
    Model,
    cel,
    validations,
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
