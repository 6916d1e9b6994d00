"""What the view keeps of each object: the few fields the decisions read. Pure, no I/O.

Records are built from the decoded wire shapes (wire.py), or from plain dicts (explain's
snapshots, tests), which are first converted to the same shapes, so both paths read an
object alike. Records are immutable msgspec Structs outside the collector's reach, and
repeated strings and small maps (label keys, node names, a ReplicaSet's labels, the
set of conditions) are shared between records rather than held once per pod.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from schedpolicy.core.api import SpecError, parse_spec
from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.resources import QuantityError, millicores, parse_quantity
from schedpolicy.core.wellknown import (
    COST_ANNOTATION,
    DRAIN_TAINTS,
    GPU_RESOURCE,
    KARPENTER_COST_ANNOTATION,
    ZONE_LABEL,
)
from schedpolicy.view import wire
from schedpolicy.view.pod_requests import milli_requests

# Annotations nobody here reads, and which can be large.
_COST_KEYS = frozenset({COST_ANNOTATION, KARPENTER_COST_ANNOTATION})
_DROPPED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})

W = TypeVar("W", bound=msgspec.Struct)
V = TypeVar("V", str, int)


class Shared:
    """Hands out one shared copy of equal small values. Bounded: when full it starts over,
    which only costs sharing, never correctness (records never mutate what they hold).
    Meant for values most records repeat (a ReplicaSet's labels, the set of conditions);
    a map unique to each object (annotations) is only given interned keys."""

    def __init__(self, limit: int = 8_192) -> None:
        self._limit = limit
        self._maps: dict[frozenset[tuple[str, str]], dict[str, str]] = {}
        self._sets: dict[frozenset[str], frozenset[str]] = {}
        self._amounts: dict[frozenset[tuple[str, int]], dict[str, int]] = {}

    def text(self, value: str) -> str:
        return sys.intern(value)

    def mapping(self, items: Mapping[str, str] | None) -> dict[str, str]:
        if not items:
            return _EMPTY
        return self._one_copy(
            self._maps, items, lambda: {sys.intern(k): sys.intern(v) for k, v in items.items()}
        )

    def keys(
        self, items: Mapping[str, str] | None, values_of: frozenset[str] = frozenset()
    ) -> dict[str, str]:
        """Interned keys; values interned too for the keys in `values_of`, whose values
        repeat across objects (a bucketed cost)."""
        if not items:
            return _EMPTY
        return {sys.intern(k): sys.intern(v) if k in values_of else v for k, v in items.items()}

    def amounts(self, items: Mapping[str, int]) -> dict[str, int]:
        """Resource amounts: the pods of one ReplicaSet, and nodes of one type, repeat them."""
        if not items:
            return _NO_AMOUNTS
        return self._one_copy(
            self._amounts, items, lambda: {sys.intern(k): v for k, v in items.items()}
        )

    def _one_copy(
        self,
        cache: dict[frozenset[tuple[str, V]], dict[str, V]],
        items: Mapping[str, V],
        copy: Callable[[], dict[str, V]],
    ) -> dict[str, V]:
        key = frozenset(items.items())
        found = cache.get(key)
        if found is None:
            if len(cache) >= self._limit:
                cache.clear()
            found = cache[key] = copy()
        return found

    def names(self, values: Iterable[str]) -> frozenset[str]:
        key = frozenset(values)
        if not key:
            return _NONE
        found = self._sets.get(key)
        if found is None:
            if len(self._sets) >= self._limit:
                self._sets.clear()
            found = self._sets[key] = key
        return found


_EMPTY: dict[str, str] = {}
_NO_AMOUNTS: dict[str, int] = {}
_NONE: frozenset[str] = frozenset()
SHARED = Shared()


_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def as_shape(shape: type[W], body: Mapping[str, Any] | W) -> W:
    """A plain dict goes through the same decoder as a watch line, so both read alike."""
    if isinstance(body, shape):
        return body
    decoder = _DECODERS.get(shape)
    if decoder is None:
        decoder = _DECODERS[shape] = msgspec.json.Decoder(shape)
    return decoder.decode(msgspec.json.encode(body))  # type: ignore[no-any-return]


# ---- policies ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyObject:
    """A SchedulingPolicy as stored: parsed when valid, with the reason when not."""

    name: str
    uid: str
    generation: int
    status: Mapping[str, Any]
    policy: Policy | None
    error: SpecError | None


def policy_object(body: Mapping[str, Any]) -> PolicyObject:
    meta = body.get("metadata", {})
    name, generation = str(meta.get("name", "")), int(meta.get("generation") or 1)
    uid = str(meta.get("uid", ""))
    try:
        spec = parse_spec(body.get("spec") or {})
    except SpecError as err:
        return PolicyObject(name, uid, generation, body.get("status") or {}, None, err)
    policy = Policy(name=name, spec=spec, generation=generation, uid=uid)
    return PolicyObject(name, uid, generation, body.get("status") or {}, policy, None)


# ---- ownership, from managedFields -------------------------------------------------------


def _fields_metadata(entry: wire.ManagedFieldsEntry) -> wire.FieldsMetadata | None:
    return entry.fields_v1.metadata if entry.fields_v1 is not None else None


def annotation_managers(
    managed_fields: Iterable[Mapping[str, Any]] | Iterable[wire.ManagedFieldsEntry] | None,
    key: str,
) -> frozenset[str]:
    """Field managers that own `metadata.annotations[key]`, read from managedFields."""
    wanted = f"f:{key}"
    owners = []
    for entry in _entries(managed_fields):
        fields = _fields_metadata(entry)
        if fields is not None and wanted in fields.annotations:
            owners.append(entry.manager)
    return SHARED.names(owners)


def _entries(
    managed_fields: Iterable[Mapping[str, Any]] | Iterable[wire.ManagedFieldsEntry] | None,
) -> list[wire.ManagedFieldsEntry]:
    return [as_shape(wire.ManagedFieldsEntry, e) for e in managed_fields or ()]


def _label_managers(entries: Iterable[wire.ManagedFieldsEntry]) -> dict[str, frozenset[str]]:
    owners: dict[str, list[str]] = defaultdict(list)
    for entry in entries:
        fields = _fields_metadata(entry)
        for field_key in fields.labels if fields is not None else ():
            if field_key.startswith("f:"):
                owners[sys.intern(field_key[2:])].append(entry.manager)
    return {k: SHARED.names(v) for k, v in owners.items()}


# ---- pods --------------------------------------------------------------------------------


class PodRecord(msgspec.Struct, frozen=True, gc=False):
    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_kind: str | None
    owner_name: str | None
    owner_uid: str | None
    node_name: str | None
    phase: str
    terminating: bool
    conditions: Mapping[str, str]
    # Effective requests (resources.py) in milli-units, every resource the pod asks for.
    requests: Mapping[str, int]
    pod_ip: str | None
    scheduler_name: str
    created: str
    resource_version: str
    cost_managers: frozenset[str]
    # Whether the stored pod has an annotations map at all; `annotations` leaves out
    # the big ones nobody reads, and a write must not mistake that for no map.
    has_annotations: bool
    # Who manages karpenter.sh/disruption-cost; looked up only on pods that carry it.
    karpenter_cost_managers: frozenset[str] = frozenset()

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def active(self) -> bool:
        """Running or about to: not finished and not on its way out."""
        return self.phase not in ("Succeeded", "Failed") and not self.terminating

    @property
    def counts_toward_fill(self) -> bool:
        return self.active and self.node_name is not None and self.owner_kind != "DaemonSet"

    @property
    def replicaset_uid(self) -> str | None:
        return self.owner_uid if self.owner_kind == "ReplicaSet" else None

    @property
    def cost(self) -> str | None:
        return self.annotations.get(COST_ANNOTATION)

    @property
    def karpenter_cost(self) -> str | None:
        return self.annotations.get(KARPENTER_COST_ANNOTATION)


def only_cost_changed(before: PodRecord, after: PodRecord) -> bool:
    """Whether `after` is `before` with nothing changed but the deletion cost (and
    Karpenter's disruption cost): their values, who manages them, whether an annotations
    map exists, and the resourceVersion. That is all our own cost patch changes, so no
    decision input moved."""
    if {k: v for k, v in before.annotations.items() if k not in _COST_KEYS} != {
        k: v for k, v in after.annotations.items() if k not in _COST_KEYS
    }:
        return False
    return before == msgspec.structs.replace(
        after,
        annotations=before.annotations,
        cost_managers=before.cost_managers,
        karpenter_cost_managers=before.karpenter_cost_managers,
        has_annotations=before.has_annotations,
        resource_version=before.resource_version,
    )


def pod_record(body: Mapping[str, Any] | wire.Pod, shared: Shared = SHARED) -> PodRecord:
    pod = as_shape(wire.Pod, body)
    meta, spec, status = pod.metadata, pod.spec, pod.status
    owner = meta.controller()
    raw_annotations = meta.annotations or {}
    annotations = (
        {k: v for k, v in raw_annotations.items() if k not in _DROPPED_ANNOTATIONS}
        if _DROPPED_ANNOTATIONS.intersection(raw_annotations)
        else raw_annotations
    )
    text = shared.text
    return PodRecord(
        uid=meta.uid,
        namespace=text(meta.namespace),
        name=meta.name,
        labels=shared.mapping(meta.labels),
        annotations=shared.keys(annotations, values_of=_COST_KEYS),
        owner_kind=text(owner.kind) if owner else None,
        owner_name=text(owner.name) if owner else None,
        owner_uid=text(owner.uid) if owner else None,
        node_name=text(spec.node_name) if spec.node_name else None,
        phase=text(status.phase or "Pending"),
        terminating=meta.deletion_timestamp is not None,
        conditions=shared.mapping({c.type: c.status for c in status.conditions or ()}),
        requests=shared.amounts(milli_requests(spec)),
        pod_ip=status.pod_ip or None,
        scheduler_name=text(spec.scheduler_name or "default-scheduler"),
        # Pods are created in bursts: many share the second, and costs are bucketed.
        created=text(meta.creation_timestamp or ""),
        resource_version=meta.resource_version,
        cost_managers=annotation_managers(meta.managed_fields, COST_ANNOTATION),
        has_annotations=bool(meta.annotations),
        karpenter_cost_managers=(
            annotation_managers(meta.managed_fields, KARPENTER_COST_ANNOTATION)
            if KARPENTER_COST_ANNOTATION in raw_annotations
            else _NONE  # not frozenset(): since 3.10 each call makes a new one, 216 B a pod
        ),
    )


# ---- nodes -------------------------------------------------------------------------------


class NodeRecord(msgspec.Struct, frozen=True, gc=False):
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    allocatable: Mapping[str, int]  # milli-units per resource, as PodRecord.requests
    ready: bool
    unschedulable: bool
    label_managers: Mapping[str, frozenset[str]]  # label key -> field managers owning it
    # Being deleted, or tainted by a node autoscaler that is draining it.
    leaving: bool = False

    @property
    def zone(self) -> str | None:
        return self.labels.get(ZONE_LABEL)

    @property
    def allocatable_gpus(self) -> int:
        return self.allocatable.get(GPU_RESOURCE, 0) // 1000

    @property
    def eligible(self) -> bool:
        return self.ready and not self.unschedulable


def _milli_amounts(quantities: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for name, value in quantities.items():
        try:
            out[name] = millicores(parse_quantity(value))
        except QuantityError:
            continue  # a node's odd resource must not hide its others
    return out


def node_record(body: Mapping[str, Any] | wire.Node, shared: Shared = SHARED) -> NodeRecord:
    node = as_shape(wire.Node, body)
    meta, status = node.metadata, node.status
    ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or ())
    return NodeRecord(
        name=shared.text(meta.name),
        uid=meta.uid,
        resource_version=meta.resource_version,
        labels=shared.mapping(meta.labels),
        annotations={
            k: v for k, v in (meta.annotations or {}).items() if k.startswith("schedpolicy.io/")
        },
        allocatable=shared.amounts(_milli_amounts(status.allocatable or {})),
        ready=ready,
        unschedulable=node.spec.unschedulable,
        label_managers=_label_managers(meta.managed_fields or ()),
        leaving=meta.deletion_timestamp is not None
        or any(t.key in DRAIN_TAINTS and t.effect == "NoSchedule" for t in node.spec.taints or ()),
    )


# ---- replicasets -------------------------------------------------------------------------


class ReplicaSetRecord(msgspec.Struct, frozen=True, gc=False):
    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    owner_kind: str | None
    owner_name: str | None
    replicas: int


def replicaset_record(
    body: Mapping[str, Any] | wire.ReplicaSet, shared: Shared = SHARED
) -> ReplicaSetRecord:
    rs = as_shape(wire.ReplicaSet, body)
    meta = rs.metadata
    owner = meta.controller()
    return ReplicaSetRecord(
        uid=meta.uid,
        namespace=shared.text(meta.namespace),
        name=meta.name,
        labels=shared.mapping(meta.labels),
        owner_kind=shared.text(owner.kind) if owner else None,
        owner_name=owner.name if owner else None,
        replicas=rs.spec.replicas or 0,
    )
