"""The placement's part of the SchedulingPolicy API: the scheduler, GPU requirements,
preferences and zone spread added to pods at admission."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from schedpolicy.core.gpu.api import GPUModel
from schedpolicy.core.policy.model import DNS_LABEL, Model, cel, validations
from schedpolicy.core.wellknown import SECONDARY_SCHEDULER

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
