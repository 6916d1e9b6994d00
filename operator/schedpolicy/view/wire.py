"""The shapes decoded from the API's JSON: only the fields the core reads. No I/O.

msgspec skips every undeclared field while it parses, so nothing else of a Pod or a Node
(its images, env, volumes, most of managedFields) is ever turned into Python objects. The
Structs are `gc=False`: they hold no cycles, and the collector need not walk them.

Each field's encoded name is its Kubernetes name; the Python name follows PEP 8.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")

# Quantities are strings on the wire, but hand-written objects (tests, `kubectl` input) may
# carry plain numbers; resources.parse_quantity accepts all three.
Quantity = str | int | float


class _Wire(msgspec.Struct, gc=False, omit_defaults=True, rename="camel"):
    pass


class OwnerReference(_Wire):
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class FieldsMetadata(_Wire):
    annotations: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict, name="f:annotations")
    labels: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict, name="f:labels")


class _FieldsV1(_Wire):
    metadata: FieldsMetadata | None = msgspec.field(default=None, name="f:metadata")


class ManagedFieldsEntry(_Wire):
    manager: str = ""
    fields_v1: _FieldsV1 | None = None


class ObjectMeta(_Wire):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    managed_fields: list[ManagedFieldsEntry] | None = None

    def controller(self) -> OwnerReference | None:
        return next((o for o in self.owner_references or () if o.controller), None)


class ResourceRequirements(_Wire):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class Container(_Wire):
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None


class PodSpec(_Wire):
    node_name: str | None = None
    scheduler_name: str | None = None
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    overhead: dict[str, Quantity] | None = None


class Condition(_Wire):
    type: str = ""
    status: str = ""


class PodStatus(_Wire):
    phase: str | None = None
    pod_ip: str | None = msgspec.field(default=None, name="podIP")
    conditions: list[Condition] | None = None


class Pod(_Wire):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class Taint(_Wire):
    key: str = ""
    effect: str = ""


class NodeSpec(_Wire):
    unschedulable: bool = False
    taints: list[Taint] | None = None


class NodeStatus(_Wire):
    allocatable: dict[str, Quantity] | None = None
    conditions: list[Condition] | None = None


class Node(_Wire):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class ReplicaSetSpec(_Wire):
    replicas: int | None = None


class ReplicaSet(_Wire):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)


class Metadata(_Wire):
    """Any object read as metadata only: Namespaces, and PartialObjectMetadata."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _VersionMeta(_Wire):
    resource_version: str = ""


class Versioned(_Wire):
    """Only an object's resourceVersion: read when the rest of it does not decode."""

    metadata: _VersionMeta = msgspec.field(default_factory=_VersionMeta)


class ListMeta(_Wire):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class List(_Wire, Generic[T]):
    """One page of a LIST."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[T] = msgspec.field(default_factory=list)


class Status(_Wire):
    """What the apiserver sends instead of an object: in an ERROR event, or as a refusal."""

    code: int = 0
    reason: str = ""
    message: str = ""


class Event(_Wire):
    """One watch line. The object stays raw until its type says how to read it."""

    type: str = ""
    object: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))


class SchedulingPolicy(_Wire):
    """A policy as the webhook reads it; its spec is parsed by api.parse_spec."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: dict[str, Any] | None = None


# ---- Dynamic Resource Allocation (resource.k8s.io/v1) ----------------------------------


class DeviceAttribute(_Wire):
    """One typed value: exactly one field is set."""

    string_: str | None = msgspec.field(default=None, name="string")
    int_: int | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    version: str | None = None


class DeviceCapacity(_Wire):
    value: Quantity = ""


class SliceDevice(_Wire):
    name: str = ""
    attributes: dict[str, DeviceAttribute] | None = None
    capacity: dict[str, DeviceCapacity] | None = None


class ResourcePool(_Wire):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(_Wire):
    driver: str = ""
    pool: ResourcePool = msgspec.field(default_factory=ResourcePool)
    node_name: str | None = None
    devices: list[SliceDevice] | None = None


class ResourceSlice(_Wire):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


class DeviceRequestResult(_Wire):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""


class DeviceAllocation(_Wire):
    results: list[DeviceRequestResult] | None = None


class AllocationResult(_Wire):
    devices: DeviceAllocation | None = None


class ResourceClaimStatus(_Wire):
    allocation: AllocationResult | None = None


class ResourceClaim(_Wire):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


class CELDeviceSelector(_Wire):
    expression: str = ""


class DeviceSelector(_Wire):
    cel: CELDeviceSelector | None = None


class DeviceClassSpec(_Wire):
    selectors: list[DeviceSelector] | None = None
    extended_resource_name: str | None = None


class DeviceClass(_Wire):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)
