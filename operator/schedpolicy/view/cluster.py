"""The operator's in-memory view of the cluster, fed only by watch events. No I/O.

Objects are reduced to the few fields the decisions need as they arrive, which
keeps memory flat on large clusters and keeps the pure core independent of
kopf's and the client's object types. The view indexes pods by node and by
ReplicaSet, and knows which nodes are eligible to hold pods, so that one
change can be traced to the pods whose cost it affects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from schedpolicy.core.deletion_cost import karpenter_gate
from schedpolicy.core.deletion_cost.samples import Rejection, Sample
from schedpolicy.core.deletion_cost.signals import registry
from schedpolicy.core.deletion_cost.signals.base import Ripple, SignalKind, ZoneCounts
from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.wellknown import COST_ANNOTATION, GPU_RESOURCE, INSTANCE_TYPE_LABEL
from schedpolicy.view import wire
from schedpolicy.view.gpu.devices import DeviceIndex
from schedpolicy.view.pod_index import PodIndex
from schedpolicy.view.records import (
    NodeRecord,
    PodRecord,
    PolicyObject,
    ReplicaSetRecord,
    annotation_managers,
    node_record,
    pod_record,
    policy_object,
    replicaset_record,
)
from schedpolicy.view.zone_spreads import ZoneSpreads, narrowing

__all__ = [
    "COST_ANNOTATION",
    "GPU_RESOURCE",
    "Affected",
    "ClusterView",
    "NodeRecord",
    "PodRecord",
    "PolicyObject",
    "ReplicaSetRecord",
    "annotation_managers",
    "node_record",
    "pod_record",
]


def _label_inputs(node: NodeRecord) -> tuple[Any, ...]:
    return (node.labels, node.annotations, node.allocatable_gpus, node.label_managers)


# ---- the view ----------------------------------------------------------------------------


def device_change(nodes: set[str], *, labels: bool) -> Affected:
    """Nodes whose DRA devices changed (slices: their labels too), or who holds them
    (claims, classes: their fill only)."""
    return Affected(nodes=set(nodes), label_nodes=set(nodes) if labels else set())


@dataclass
class Affected:
    """What a change touches beyond the object itself."""

    pods: set[str] = field(default_factory=set)  # pod UIDs
    nodes: set[str] = field(default_factory=set)  # nodes whose fill changed
    replicasets: set[str] = field(default_factory=set)  # RS UIDs whose zone spread changed
    all_pods: bool = False  # eligible zones or namespace labels changed
    label_nodes: set[str] = field(default_factory=set)  # nodes whose GPU labels need a look

    def __bool__(self) -> bool:
        return bool(
            self.pods or self.nodes or self.replicasets or self.all_pods or self.label_nodes
        )

    def merge(self, other: Affected) -> None:
        self.pods |= other.pods
        self.nodes |= other.nodes
        self.replicasets |= other.replicasets
        self.all_pods = self.all_pods or other.all_pods
        self.label_nodes |= other.label_nodes


SampleKey = tuple[str, int, str, str]  # pod UID, port, path, metric


class ClusterView:
    def __init__(self) -> None:
        self._policies: dict[str, PolicyObject] = {}
        self.pods: dict[str, PodRecord] = {}
        self._uid_by_key: dict[tuple[str, str], str] = {}
        self._index = PodIndex()
        self.nodes: dict[str, NodeRecord] = {}
        self.replicasets: dict[str, ReplicaSetRecord] = {}
        self.namespaces: dict[str, Mapping[str, str]] = {}
        self._scraped: dict[SampleKey, Sample | Rejection] = {}
        # Ready, schedulable nodes per zone: the zones ZoneBalance may balance over.
        self.eligible_nodes_by_zone: dict[str, set[str]] = defaultdict(set)
        self._eligible_zones: frozenset[str] | None = None
        self._instance_types: frozenset[str] | None = None
        self.devices = DeviceIndex()
        self.karpenter_gate = karpenter_gate.Memory()  # Karpenter's gate, once seen at work
        # What re-costs pods, from the signals' registry (see recosting()).
        node_fields, ripples = recosting(registry.SIGNALS)
        self._cost_inputs: Callable[[NodeRecord], tuple[object, ...]] = attrgetter(*node_fields)
        self._watches = tuple(Watch.of(r) for r in ripples)
        self._spreads = ZoneSpreads(narrowing(ripples))

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

    def policy(self, name: str | None) -> Policy | None:
        """The valid policy of this name, if there is one."""
        obj = self._policies.get(name) if name is not None else None
        return obj.policy if obj is not None else None

    # -- pods

    def pod(self, namespace: str, name: str) -> PodRecord | None:
        uid = self._uid_by_key.get((namespace, name))
        return self.pods.get(uid) if uid else None

    def upsert_pod(self, body: Mapping[str, Any] | wire.Pod) -> tuple[PodRecord, Affected]:
        new = pod_record(body)
        old = self.pods.get(new.uid)
        stale_uid = self._uid_by_key.get(new.key)
        affected = Affected(pods={new.uid})
        if stale_uid is not None and stale_uid != new.uid:
            # Same name, new UID: the old pod is gone even if its DELETED event was missed.
            affected.merge(self.remove_pod(stale_uid))
        if old is not None:
            self._index.remove(old)
        self.pods[new.uid] = new
        self._uid_by_key[new.key] = new.uid
        self._index.add(new)
        affected.merge(self._ripple(old, new))
        affected.all_pods |= self.karpenter_gate.saw_write(new.key, new.cost_managers)
        return new, affected

    def remove_pod(self, uid: str) -> Affected:
        old = self.pods.pop(uid, None)
        if old is None:
            return Affected()
        self._index.remove(old)
        if self._uid_by_key.get(old.key) == uid:
            del self._uid_by_key[old.key]
        for key in [k for k in self._scraped if k[0] == uid]:
            del self._scraped[key]
        return self._ripple(old, None)

    def _ripple(self, old: PodRecord | None, new: PodRecord | None) -> Affected:
        """The other pods whose cost a pod's change moves, as each signal's Ripple says."""
        affected = rippled(self._watches, old, new)
        for rs in affected.replicasets:
            self._spreads.invalidate(rs)
        return affected

    # -- nodes

    def upsert_node(self, body: Mapping[str, Any] | wire.Node) -> tuple[NodeRecord, Affected]:
        new = node_record(body)
        old = self.nodes.get(new.name)
        self.nodes[new.name] = new
        affected = Affected()
        if old is None or self._cost_inputs(old) != self._cost_inputs(new):
            affected.nodes.add(new.name)
        if old is None or old.labels.get(INSTANCE_TYPE_LABEL) != new.labels.get(
            INSTANCE_TYPE_LABEL
        ):
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
            self._spreads.clear()
            affected.all_pods = True
        elif (old.zone if old else None) != (new.zone if new else None):
            record = new or old
            assert record is not None
            for uid in self._index.on_node(record.name):
                rs = self.pods[uid].replicaset_uid
                if rs is not None:
                    affected.replicasets.add(rs)
                    self._spreads.invalidate(rs)
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
                n.labels[INSTANCE_TYPE_LABEL]
                for n in self.nodes.values()
                if INSTANCE_TYPE_LABEL in n.labels
            )
        return self._instance_types

    def requested(self, node: str) -> Mapping[str, int]:
        """Milli-units per resource requested by the node's pods that count toward its fill."""
        return self._index.requested(node)

    def pods_on_node(self, node: str) -> Set[str]:
        return self._index.on_node(node)

    def pods_in_replicaset(self, uid: str) -> Set[str]:
        return self._index.in_replicaset(uid)

    def respread(self, uid: str) -> Set[str]:
        """The pods of a ReplicaSet whose cost its changed zone spread may move, since the
        last time this was asked (view/zone_spreads.py)."""
        now = self.zone_spread(uid)
        return self._spreads.moved(uid, now, self.eligible_zones(), self._index.in_replicaset(uid))

    def replanning_all(self) -> None:
        """Every pod is about to be planned: no spread need be compared."""
        self._spreads.forget_reads()

    def unbound_pods(self) -> Set[str]:
        """UIDs of the pods no node is bound to yet."""
        return self._index.unbound()

    # -- replicasets and namespaces

    def upsert_replicaset(self, body: Mapping[str, Any] | wire.ReplicaSet) -> None:
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

    def zone_spread(self, replicaset_uid: str | None) -> ZoneCounts:
        """A ReplicaSet's active pods per zone (every eligible zone present), and each pod's
        position in its zone, oldest first. Cached until one of its pods or a node changes."""
        if replicaset_uid is None:
            return ZoneCounts(dict.fromkeys(self.eligible_zones(), 0), {})
        cached = self._spreads.get(replicaset_uid)
        if cached is not None:
            return cached
        members: dict[str, list[PodRecord]] = defaultdict(list)
        for uid in self._index.in_replicaset(replicaset_uid):
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
        spread = ZoneCounts(counts, ranks)
        self._spreads.put(replicaset_uid, spread)
        return spread

    def zone_counts(self, replicaset_uid: str | None) -> dict[str, int]:
        return dict(self.zone_spread(replicaset_uid).counts)

    def sample(self, key: SampleKey) -> Sample | Rejection | None:
        return self._scraped.get(key)

    def record_sample(self, key: SampleKey, reading: Sample | Rejection) -> bool:
        """Keep the scraper's latest reading; True when it differs from the one before."""
        if self._scraped.get(key) == reading:
            return False
        self._scraped[key] = reading
        return True


def recosting(kinds: tuple[SignalKind[Any], ...]) -> tuple[tuple[str, ...], tuple[Ripple, ...]]:
    """The node fields any signal reads (and `leaving` and the labels, which a cost plan
    reads), and each signal's ripple: a change to either re-costs pods."""
    fields = ("labels", "leaving", *(f for k in kinds for f in k.node_fields))
    return tuple(dict.fromkeys(fields)), tuple(k.ripple for k in kinds if k.ripple is not None)


@dataclass(frozen=True, slots=True)
class Watch:
    """A Ripple made ready for upsert_pod, which runs it on every pod event: its fields
    read by one attrgetter, not a name lookup each."""

    on_node: bool  # the scope: the pod's node, or else its ReplicaSet
    when: Callable[[PodRecord], bool]
    key: Callable[[PodRecord], tuple[Any, ...]]  # the scope's key first, then the other fields

    @classmethod
    def of(cls, ripple: Ripple) -> Watch:
        scope = "node_name" if ripple.scope == "node" else "replicaset_uid"
        fields = (scope, *(f for f in ripple.fields if f != scope))
        # attrgetter of one name returns the value, not a 1-tuple; the key is always a tuple.
        read = attrgetter(*fields, scope) if len(fields) == 1 else attrgetter(*fields)
        return cls(ripple.scope == "node", attrgetter(ripple.when), read)

    def watched(self, pod: PodRecord | None) -> tuple[Any, ...] | None:
        return self.key(pod) if pod is not None and self.when(pod) else None


def rippled(watches: tuple[Watch, ...], old: PodRecord | None, new: PodRecord | None) -> Affected:
    """The nodes and ReplicaSets whose pods a pod's change re-costs."""
    affected = Affected()
    for watch in watches:
        before, after = watch.watched(old), watch.watched(new)
        if before == after:
            continue
        touched = {k[0] for k in (before, after) if k is not None and k[0] is not None}
        if watch.on_node:
            affected.nodes |= touched
        else:
            affected.replicasets |= touched
    return affected
