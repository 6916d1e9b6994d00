"""Where the informers deliver: the view, and the reconciler told what each change touched.

One sink per kind, each keyed as its Resource says (pods and ReplicaSets by UID, nodes and
namespaces by name). The informers call them inline, on the event loop's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from schedpolicy.shell.informer import Informer, Resource, by_name, by_uid
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.view import wire
from schedpolicy.view.cluster import Affected, ClusterView, device_change
from schedpolicy.view.gpu.devices import DeviceIndex

S = TypeVar("S")

PODS = Resource("pods", "/api/v1/pods", wire.Pod, by_uid)
NODES = Resource("nodes", "/api/v1/nodes", wire.Node, by_name)
REPLICASETS = Resource("replicasets", "/apis/apps/v1/replicasets", wire.ReplicaSet, by_uid)
RESOURCE_SLICES = Resource(
    "resourceslices", "/apis/resource.k8s.io/v1/resourceslices", wire.ResourceSlice, by_name
)
RESOURCE_CLAIMS = Resource(
    "resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims", wire.ResourceClaim, by_uid
)
DEVICE_CLASSES = Resource(
    "deviceclasses", "/apis/resource.k8s.io/v1/deviceclasses", wire.DeviceClass, by_name
)
NAMESPACES = Resource(
    "namespaces", "/api/v1/namespaces", wire.Metadata, by_name, metadata_only=True
)


class PodFeed:
    def __init__(self, view: ClusterView, reconciler: Reconciler) -> None:
        self.view, self.reconciler = view, reconciler

    def upsert(self, obj: wire.Pod) -> None:
        before = self.view.pods.get(obj.metadata.uid)
        pod, affected = self.view.upsert_pod(obj)
        gate = self.reconciler.costs.watch_gate(pod, before)
        if gate:  # the first sign of Karpenter's deletion-cost gate: the status says it
            affected.merge(gate)
            self.reconciler.status_changed()
        if self.reconciler.pod_seen(pod, before):
            affected.pods.discard(pod.uid)
        if affected:  # our own echo touches nothing: no reconcile pass to wake
            self.reconciler.changed(affected)

    def delete(self, obj: wire.Pod) -> None:
        self._gone(obj.metadata.uid)

    def _gone(self, uid: str) -> None:
        self.reconciler.changed(self.view.remove_pod(uid))
        self.reconciler.pod_gone(uid)

    def prune(self, keep: set[str]) -> None:
        for uid in [uid for uid in self.view.pods if uid not in keep]:
            self._gone(uid)


class NodeFeed:
    def __init__(self, view: ClusterView, reconciler: Reconciler) -> None:
        self.view, self.reconciler = view, reconciler

    def upsert(self, obj: wire.Node) -> None:
        node, affected = self.view.upsert_node(obj)
        self.reconciler.node_seen(node)
        self.reconciler.changed(affected)

    def delete(self, obj: wire.Node) -> None:
        self._gone(obj.metadata.name)

    def _gone(self, name: str) -> None:
        self.reconciler.changed(self.view.remove_node(name))
        self.reconciler.node_gone(name)

    def prune(self, keep: set[str]) -> None:
        for name in [name for name in self.view.nodes if name not in keep]:
            self._gone(name)


class ReplicaSetFeed:
    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def upsert(self, obj: wire.ReplicaSet) -> None:
        self.view.upsert_replicaset(obj)

    def delete(self, obj: wire.ReplicaSet) -> None:
        self.view.remove_replicaset(obj.metadata.uid)

    def prune(self, keep: set[str]) -> None:
        for uid in [uid for uid in self.view.replicasets if uid not in keep]:
            self.view.remove_replicaset(uid)


class NamespaceFeed:
    def __init__(self, view: ClusterView, changed: Callable[[Affected], None]) -> None:
        self.view, self.changed = view, changed

    def upsert(self, obj: wire.Metadata) -> None:
        self.changed(self.view.upsert_namespace(obj.metadata.name, obj.metadata.labels or {}))

    def delete(self, obj: wire.Metadata) -> None:
        self.view.remove_namespace(obj.metadata.name)

    def prune(self, keep: set[str]) -> None:
        for name in [name for name in self.view.namespaces if name not in keep]:
            self.view.remove_namespace(name)


class DeviceFeed(Generic[S]):
    """One DRA kind into the view's device index: slices and classes by name, claims by
    UID. Each change wakes the reconciler for the nodes it touched."""

    def __init__(
        self,
        changed: Callable[[Affected], None],
        upsert: Callable[[S], set[str]],
        remove: Callable[[str], set[str]],
        held: Callable[[], Iterable[str]],
        *,
        key: Callable[[S], str],
        labels: bool = False,
    ) -> None:
        self.changed, self._upsert, self._remove = changed, upsert, remove
        self._key, self._held, self._labels = key, held, labels

    def upsert(self, obj: S) -> None:
        self.changed(device_change(self._upsert(obj), labels=self._labels))

    def delete(self, obj: S) -> None:
        self.changed(device_change(self._remove(self._key(obj)), labels=self._labels))

    def prune(self, keep: set[str]) -> None:
        for key in [k for k in self._held() if k not in keep]:
            self.changed(device_change(self._remove(key), labels=self._labels))


def device_informers(
    kube: Kube, devices: DeviceIndex, changed: Callable[[Affected], None], timeout_seconds: int
) -> list[Informer[Any]]:
    """ResourceSlices, ResourceClaims and DeviceClasses (resource.k8s.io/v1, served by
    default since 1.34): which DRA GPUs the nodes have, and which are held."""
    feeds: list[tuple[Resource[Any], DeviceFeed[Any]]] = [
        (
            DEVICE_CLASSES,
            DeviceFeed(
                changed,
                devices.upsert_class,
                devices.remove_class,
                lambda: list(devices.classes),
                key=by_name,
            ),
        ),
        (
            RESOURCE_SLICES,
            DeviceFeed(
                changed,
                devices.upsert_slice,
                devices.remove_slice,
                lambda: list(devices.slices),
                key=by_name,
                labels=True,
            ),
        ),
        (
            RESOURCE_CLAIMS,
            DeviceFeed(
                changed,
                devices.upsert_claim,
                devices.remove_claim,
                lambda: list(devices.claims),
                key=by_uid,
            ),
        ),
    ]
    return [Informer(kube, r, f, timeout_seconds=timeout_seconds) for r, f in feeds]


def controller_informers(
    kube: Kube, view: ClusterView, reconciler: Reconciler, timeout_seconds: int
) -> list[Informer[Any]]:
    """What the controller watches besides its policies, each into the view."""
    t = timeout_seconds
    return [
        Informer(kube, NAMESPACES, NamespaceFeed(view, reconciler.changed), timeout_seconds=t),
        Informer(kube, REPLICASETS, ReplicaSetFeed(view), timeout_seconds=t),
        Informer(kube, NODES, NodeFeed(view, reconciler), timeout_seconds=t),
        Informer(kube, PODS, PodFeed(view, reconciler), timeout_seconds=t),
        *device_informers(kube, view.devices, reconciler.changed, t),
    ]
