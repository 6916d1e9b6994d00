"""The operator's in-memory view of the cluster, fed only by watch events. No I/O.

Objects are reduced to the few fields the decisions need as they arrive, which
keeps memory flat on large clusters and keeps the pure core independent of
kopf's and the client's object types. The view indexes pods by node and by
ReplicaSet, and knows which nodes are eligible to hold pods, so that one
change can be traced to the pods whose cost it affects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from schedpolicy.api import MetricSignal, SpecError, parse_spec
from schedpolicy.costs import ZONE, CostInputs
from schedpolicy.gpu import INSTANCE_TYPE
from schedpolicy.matching import Policy
from schedpolicy.resources import QuantityError, effective_requests, millicores, parse_quantity
from schedpolicy.samples import Rejection, Sample, from_annotation

COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
GPU_RESOURCE = "nvidia.com/gpu"
_COST_FIELD = f"f:{COST_ANNOTATION}"
# Annotations nobody here reads, and which can be large.
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


# ---- records -----------------------------------------------------------------------------


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


def annotation_managers(managed_fields: Iterable[Mapping[str, Any]], key: str) -> frozenset[str]:
    """Field managers that own `metadata.annotations[key]`, read from managedFields."""
    wanted = f"f:{key}"
    owners = set()
    for entry in managed_fields or []:
        fields = entry.get("fieldsV1") or {}
        if wanted in (fields.get("f:metadata") or {}).get("f:annotations", {}):
            owners.add(str(entry.get("manager", "")))
    return frozenset(owners)


@dataclass(frozen=True, slots=True)
class PodRecord:
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
    cpu_mcpu: int
    gpus: int
    pod_ip: str | None
    scheduler_name: str
    created: str
    resource_version: str
    cost_managers: frozenset[str]
    # Whether the stored pod has an annotations map at all; `annotations` leaves out
    # the big ones nobody reads, and a write must not mistake that for no map.
    has_annotations: bool

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


def pod_record(body: Mapping[str, Any]) -> PodRecord:
    meta, spec, status = body.get("metadata", {}), body.get("spec", {}), body.get("status", {})
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    requests = effective_requests(spec)
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROPPED_ANNOTATIONS
    }
    return PodRecord(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        annotations=annotations,
        owner_kind=owner.get("kind") if owner else None,
        owner_name=owner.get("name") if owner else None,
        owner_uid=owner.get("uid") if owner else None,
        node_name=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        terminating=meta.get("deletionTimestamp") is not None,
        conditions={c["type"]: c.get("status", "") for c in status.get("conditions") or []},
        cpu_mcpu=millicores(requests["cpu"]) if "cpu" in requests else 0,
        gpus=int(requests[GPU_RESOURCE]) if GPU_RESOURCE in requests else 0,
        pod_ip=status.get("podIP") or None,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        created=str(meta.get("creationTimestamp") or ""),
        resource_version=str(meta.get("resourceVersion", "")),
        cost_managers=annotation_managers(meta.get("managedFields") or [], COST_ANNOTATION),
        has_annotations=bool(meta.get("annotations")),
    )


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    allocatable_mcpu: int
    allocatable_gpus: int
    ready: bool
    unschedulable: bool
    label_managers: Mapping[str, frozenset[str]]  # label key -> field managers owning it

    @property
    def zone(self) -> str | None:
        return self.labels.get(ZONE)

    @property
    def eligible(self) -> bool:
        return self.ready and not self.unschedulable


def _quantity_or_zero(value: Any) -> int:
    try:
        return int(parse_quantity(value)) if value is not None else 0
    except QuantityError:
        return 0


def _label_managers(managed_fields: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    owners: dict[str, set[str]] = defaultdict(set)
    for entry in managed_fields or []:
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        for field_key in labels:
            if field_key.startswith("f:"):
                owners[field_key[2:]].add(str(entry.get("manager", "")))
    return {k: frozenset(v) for k, v in owners.items()}


def node_record(body: Mapping[str, Any]) -> NodeRecord:
    meta, spec, status = body.get("metadata", {}), body.get("spec", {}), body.get("status", {})
    allocatable = status.get("allocatable") or {}
    try:
        cpu = millicores(parse_quantity(allocatable.get("cpu", "0")))
    except QuantityError:
        cpu = 0
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return NodeRecord(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels=dict(meta.get("labels") or {}),
        annotations={
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k.startswith("schedpolicy.io/")
        },
        allocatable_mcpu=cpu,
        allocatable_gpus=_quantity_or_zero(allocatable.get(GPU_RESOURCE)),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        label_managers=_label_managers(meta.get("managedFields") or []),
    )


@dataclass(frozen=True, slots=True)
class ReplicaSetRecord:
    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    owner_kind: str | None
    owner_name: str | None
    replicas: int


def replicaset_record(body: Mapping[str, Any]) -> ReplicaSetRecord:
    meta = body.get("metadata", {})
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return ReplicaSetRecord(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        owner_kind=owner.get("kind") if owner else None,
        owner_name=owner.get("name") if owner else None,
        replicas=int((body.get("spec") or {}).get("replicas") or 0),
    )


def _label_inputs(node: NodeRecord) -> tuple[Any, ...]:
    return (node.labels, node.annotations, node.allocatable_gpus, node.label_managers)


# ---- the view ----------------------------------------------------------------------------


@dataclass
class Affected:
    """What a change touches beyond the object itself."""

    pods: set[str] = field(default_factory=set)  # pod UIDs
    nodes: set[str] = field(default_factory=set)  # nodes whose fill changed
    replicasets: set[str] = field(default_factory=set)  # RS UIDs whose zone spread changed
    all_pods: bool = False  # eligible zones or namespace labels changed
    label_nodes: set[str] = field(default_factory=set)  # nodes whose GPU labels need a look

    def merge(self, other: Affected) -> None:
        self.pods |= other.pods
        self.nodes |= other.nodes
        self.replicasets |= other.replicasets
        self.all_pods = self.all_pods or other.all_pods
        self.label_nodes |= other.label_nodes


SampleKey = tuple[str, int, str, str]  # pod UID, port, path, metric


@dataclass(frozen=True)
class ZoneSpread:
    counts: Mapping[str, int]
    ranks: Mapping[str, int]  # pod UID -> position in its zone, oldest first


class ClusterView:
    def __init__(self) -> None:
        self._policies: dict[str, PolicyObject] = {}
        self.pods: dict[str, PodRecord] = {}
        self._uid_by_key: dict[tuple[str, str], str] = {}
        self.pods_by_node: dict[str, set[str]] = defaultdict(set)
        self.pods_by_replicaset: dict[str, set[str]] = defaultdict(set)
        # Pods with no node yet: few in a healthy cluster, so scanning them is cheap.
        self.unbound: set[str] = set()
        self._requested_mcpu: dict[str, int] = defaultdict(int)
        self.nodes: dict[str, NodeRecord] = {}
        self.replicasets: dict[str, ReplicaSetRecord] = {}
        self.namespaces: dict[str, Mapping[str, str]] = {}
        self.scraped: dict[SampleKey, Sample | Rejection] = {}
        # Ready, schedulable nodes per zone: the zones ZoneBalance may balance over.
        self.eligible_nodes_by_zone: dict[str, set[str]] = defaultdict(set)
        self._eligible_zones: frozenset[str] | None = None
        self._instance_types: frozenset[str] | None = None
        self._zone_cache: dict[str, ZoneSpread] = {}
        # UIDs seen per kind (deleted ones included), until the sync barrier is through.
        self.seen: dict[str, set[str]] = defaultdict(set)
        self._tracking = True

    def note(self, kind: str, uid: str) -> None:
        if self._tracking:
            self.seen[kind].add(uid)

    def stop_tracking(self) -> None:
        self._tracking = False
        self.seen.clear()

    # -- policies

    def upsert_policy(self, body: Mapping[str, Any]) -> tuple[PolicyObject, bool]:
        """Store a policy; the flag says whether what it asks for changed (not just status)."""
        obj = policy_object(body)
        old = self._policies.get(obj.name)
        self._policies[obj.name] = obj
        changed = old is None or (old.uid, old.generation, old.policy, old.error is None) != (
            obj.uid,
            obj.generation,
            obj.policy,
            obj.error is None,
        )
        return obj, changed

    def remove_policy(self, name: str) -> None:
        self._policies.pop(name, None)

    def policy_objects(self) -> Iterator[PolicyObject]:
        return iter(sorted(self._policies.values(), key=lambda p: p.name))

    def policies(self) -> list[Policy]:
        return [o.policy for o in self.policy_objects() if o.policy is not None]

    # -- pods

    def pod(self, namespace: str, name: str) -> PodRecord | None:
        uid = self._uid_by_key.get((namespace, name))
        return self.pods.get(uid) if uid else None

    def _index(self, pod: PodRecord, sign: int) -> None:
        node, rs = pod.node_name, pod.replicaset_uid
        if node is None:
            if sign > 0:
                self.unbound.add(pod.uid)
            else:
                self.unbound.discard(pod.uid)
        else:
            if sign > 0:
                self.pods_by_node[node].add(pod.uid)
            else:
                self.pods_by_node[node].discard(pod.uid)
                if not self.pods_by_node[node]:
                    del self.pods_by_node[node]
            if pod.counts_toward_fill:
                self._requested_mcpu[node] += sign * pod.cpu_mcpu
        if rs is not None:
            if sign > 0:
                self.pods_by_replicaset[rs].add(pod.uid)
            else:
                self.pods_by_replicaset[rs].discard(pod.uid)
                if not self.pods_by_replicaset[rs]:
                    del self.pods_by_replicaset[rs]

    def upsert_pod(self, body: Mapping[str, Any]) -> tuple[PodRecord, Affected]:
        new = pod_record(body)
        old = self.pods.get(new.uid)
        stale_uid = self._uid_by_key.get(new.key)
        affected = Affected(pods={new.uid})
        if stale_uid is not None and stale_uid != new.uid:
            # Same name, new UID: the old pod is gone even if its DELETED event was missed.
            affected.merge(self.remove_pod(stale_uid))
        if old is not None:
            self._index(old, -1)
        self.pods[new.uid] = new
        self._uid_by_key[new.key] = new.uid
        self._index(new, +1)
        affected.merge(self._ripple(old, new))
        return new, affected

    def remove_pod(self, uid: str) -> Affected:
        old = self.pods.pop(uid, None)
        if old is None:
            return Affected()
        self._index(old, -1)
        if self._uid_by_key.get(old.key) == uid:
            del self._uid_by_key[old.key]
        for key in [k for k in self.scraped if k[0] == uid]:
            del self.scraped[key]
        return self._ripple(old, None)

    def _ripple(self, old: PodRecord | None, new: PodRecord | None) -> Affected:
        affected = Affected()

        def fill(p: PodRecord | None) -> tuple[str | None, int]:
            return (
                (p.node_name, p.cpu_mcpu) if p is not None and p.counts_toward_fill else (None, 0)
            )

        def spread(p: PodRecord | None) -> tuple[str | None, str | None]:
            if p is None or not p.active:
                return (None, None)
            return (p.replicaset_uid, p.node_name)

        if fill(old) != fill(new):
            affected.nodes |= {n for n in (fill(old)[0], fill(new)[0]) if n is not None}
        if spread(old) != spread(new):
            affected.replicasets |= {r for r in (spread(old)[0], spread(new)[0]) if r is not None}
            for rs in affected.replicasets:
                self._zone_cache.pop(rs, None)
        return affected

    # -- nodes

    def upsert_node(self, body: Mapping[str, Any]) -> tuple[NodeRecord, Affected]:
        new = node_record(body)
        old = self.nodes.get(new.name)
        self.nodes[new.name] = new
        affected = Affected()
        if old is None or (old.labels, old.allocatable_mcpu) != (new.labels, new.allocatable_mcpu):
            affected.nodes.add(new.name)
        if old is None or old.labels.get(INSTANCE_TYPE) != new.labels.get(INSTANCE_TYPE):
            self._instance_types = None
        if old is None or (old.eligible, old.zone) != (new.eligible, new.zone):
            affected.merge(self._rezone(old, new))
        if old is None or _label_inputs(old) != _label_inputs(new):
            affected.label_nodes.add(new.name)
        return new, affected

    def remove_node(self, name: str) -> Affected:
        old = self.nodes.pop(name, None)
        if old is None:
            return Affected()
        self._instance_types = None
        affected = self._rezone(old, None)
        affected.nodes.add(name)
        return affected

    def _rezone(self, old: NodeRecord | None, new: NodeRecord | None) -> Affected:
        """A node came, went, or changed zone or eligibility. Every pod's cost changes only
        when the set of eligible zones does; otherwise just the spreads of the ReplicaSets
        with pods on this node (their pods' zone may have changed)."""
        affected = Affected()
        before = self.eligible_zones()
        for record, member in ((old, False), (new, True)):
            if record is None or record.zone is None or not record.eligible:
                continue
            names = self.eligible_nodes_by_zone[record.zone]
            if member:
                names.add(record.name)
            else:
                names.discard(record.name)
                if not names:
                    del self.eligible_nodes_by_zone[record.zone]
        self._eligible_zones = None
        if self.eligible_zones() != before:
            self._zone_cache.clear()
            affected.all_pods = True
        elif (old.zone if old else None) != (new.zone if new else None):
            record = new or old
            assert record is not None
            for uid in self.pods_by_node.get(record.name, ()):
                rs = self.pods[uid].replicaset_uid
                if rs is not None:
                    affected.replicasets.add(rs)
                    self._zone_cache.pop(rs, None)
        return affected

    def node_names(self) -> set[str]:
        return set(self.nodes)

    def eligible_zones(self) -> frozenset[str]:
        if self._eligible_zones is None:
            self._eligible_zones = frozenset(self.eligible_nodes_by_zone)
        return self._eligible_zones

    def instance_types(self) -> frozenset[str]:
        """Instance types of the known nodes; admission asks on every pod create, so this is
        cached until a node comes, goes or changes its instance type."""
        if self._instance_types is None:
            self._instance_types = frozenset(
                n.labels[INSTANCE_TYPE] for n in self.nodes.values() if INSTANCE_TYPE in n.labels
            )
        return self._instance_types

    def requested_mcpu(self, node: str) -> int:
        return self._requested_mcpu.get(node, 0)

    # -- replicasets and namespaces

    def upsert_replicaset(self, body: Mapping[str, Any]) -> None:
        rs = replicaset_record(body)
        self.replicasets[rs.uid] = rs

    def remove_replicaset(self, uid: str) -> None:
        self.replicasets.pop(uid, None)

    def upsert_namespace(self, name: str, labels: Mapping[str, str]) -> Affected:
        old = self.namespaces.get(name)
        self.namespaces[name] = dict(labels)
        if old == labels:
            return Affected()
        return Affected(pods={p.uid for p in self.pods.values() if p.namespace == name})

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)

    # -- what the signals read

    def zone_spread(self, replicaset_uid: str | None) -> ZoneSpread:
        """A ReplicaSet's active pods per zone (every eligible zone present), and each pod's
        position in its zone, oldest first. Cached until one of its pods or a node changes."""
        if replicaset_uid is None:
            return ZoneSpread(dict.fromkeys(self.eligible_zones(), 0), {})
        cached = self._zone_cache.get(replicaset_uid)
        if cached is not None:
            return cached
        members: dict[str, list[PodRecord]] = defaultdict(list)
        for uid in self.pods_by_replicaset.get(replicaset_uid, ()):
            pod = self.pods[uid]
            node = self.nodes.get(pod.node_name) if pod.node_name else None
            if pod.active and node is not None and node.zone is not None:
                members[node.zone].append(pod)
        counts = dict.fromkeys(self.eligible_zones(), 0)
        ranks: dict[str, int] = {}
        for zone, pods in members.items():
            counts[zone] = len(pods)
            for rank, pod in enumerate(sorted(pods, key=lambda p: (p.created, p.name))):
                ranks[pod.uid] = rank
        spread = ZoneSpread(counts, ranks)
        self._zone_cache[replicaset_uid] = spread
        return spread

    def zone_counts(self, replicaset_uid: str | None) -> dict[str, int]:
        return dict(self.zone_spread(replicaset_uid).counts)

    def sample_for(self, pod: PodRecord, metric: MetricSignal) -> Sample | Rejection | None:
        if metric.annotation is not None:
            return from_annotation(pod.annotations.get(metric.annotation.key))
        assert metric.prometheus is not None
        src = metric.prometheus
        return self.scraped.get((pod.uid, src.port, src.path, src.metric))

    def cost_inputs(self, pod: PodRecord, policy: Policy) -> CostInputs:
        node = self.nodes.get(pod.node_name) if pod.node_name else None
        spec = policy.spec.deletion_cost
        samples: dict[int, Sample | Rejection] = {}
        needs_zones = False
        for index, signal in enumerate(spec.signals if spec else ()):
            if signal.metric is not None:
                found = self.sample_for(pod, signal.metric)
                if found is not None:
                    samples[index] = found
            needs_zones = needs_zones or signal.type == "ZoneBalance"
        spread = self.zone_spread(pod.replicaset_uid) if needs_zones else None
        return CostInputs(
            node_name=pod.node_name if node is not None else None,
            node_labels=node.labels if node is not None else {},
            node_allocatable_mcpu=node.allocatable_mcpu if node is not None else 0,
            node_requested_mcpu=self.requested_mcpu(node.name) if node is not None else 0,
            zone_counts=spread.counts if spread else {},
            eligible_zones=self.eligible_zones() if needs_zones else frozenset(),
            zone_rank=spread.ranks.get(pod.uid) if spread else None,
            conditions=pod.conditions,
            samples=samples,
            pod_uid=pod.uid,
        )
