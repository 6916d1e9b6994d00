"""The DRA part of the view: ResourceSlices, ResourceClaims and DeviceClasses. No I/O.

Each kind is reduced to what core/gpu/dra.py reads. The index answers, per node, what its
slices publish and how much of it claims hold, and says which nodes a change touches so
that only their pods' costs and labels are looked at again. Slices that name no node
(`allNodes`, a node selector: network-attached devices) are kept out: they are nobody's
GPUs for fill or labels.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from schedpolicy.core.gpu import dra
from schedpolicy.core.gpu.device_selectors import ClassSelectors, Value, class_selectors
from schedpolicy.view import wire
from schedpolicy.view.records import as_shape


def _value(attribute: wire.DeviceAttribute) -> Value | None:
    for found in (attribute.string_, attribute.int_, attribute.bool_, attribute.version):
        if found is not None:
            return found
    return None


def slice_record(body: Mapping[str, Any] | wire.ResourceSlice) -> dra.Slice:
    obj = as_shape(wire.ResourceSlice, body)
    spec = obj.spec
    devices = []
    for device in spec.devices or ():
        attributes = {
            key: value
            for key, raw in (device.attributes or {}).items()
            if (value := _value(raw)) is not None
        }
        capacity = {key: str(c.value) for key, c in (device.capacity or {}).items()}
        devices.append(
            dra.Device(
                spec.driver, spec.pool.name, device.name, obj.metadata.name, attributes, capacity
            )
        )
    return dra.Slice(
        name=obj.metadata.name,
        driver=spec.driver,
        pool=spec.pool.name,
        generation=spec.pool.generation,
        slice_count=max(1, spec.pool.resource_slice_count),
        node_name=spec.node_name or None,
        devices=tuple(devices),
    )


def claim_record(body: Mapping[str, Any] | wire.ResourceClaim) -> dra.Claim:
    obj = as_shape(wire.ResourceClaim, body)
    meta = obj.metadata
    extended = (meta.annotations or {}).get(dra.EXTENDED_CLAIM_ANNOTATION) == "true"
    allocation = obj.status.allocation
    results = allocation.devices.results if allocation and allocation.devices else None
    ref = f"{meta.namespace}/{meta.name}"
    return dra.Claim(
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        results=tuple(
            dra.Allocation(ref, r.request, (r.driver, r.pool, r.device), extended)
            for r in results or ()
        ),
    )


def class_record(body: Mapping[str, Any] | wire.DeviceClass) -> ClassSelectors:
    obj = as_shape(wire.DeviceClass, body)
    expressions = [s.cel.expression for s in obj.spec.selectors or () if s.cel is not None]
    return class_selectors(obj.metadata.name, expressions)


_NOTHING = dra.Published(())


class DeviceIndex:
    def __init__(self) -> None:
        self.slices: dict[str, dra.Slice] = {}
        self.claims: dict[str, dra.Claim] = {}  # by UID
        self.classes: dict[str, ClassSelectors] = {}
        self._by_node: dict[str, set[str]] = defaultdict(set)  # node -> slice names
        self._pool_nodes: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._held: dict[dra.DeviceKey, list[dra.Allocation]] = defaultdict(list)
        self._published: dict[str, dra.Published] = {}
        # Every pod on a node asks for the node's share: kept until its devices or their
        # holders change, so a pass over a node's pods evaluates the selectors once.
        self._shares: dict[tuple[str, tuple[str, ...]], dra.DeviceShare] = {}

    def _forget(self, nodes: set[str]) -> set[str]:
        for node in nodes:
            self._published.pop(node, None)
        if nodes and self._shares:
            self._shares = {k: v for k, v in self._shares.items() if k[0] not in nodes}
        return nodes

    # -- slices

    def upsert_slice(self, body: Mapping[str, Any] | wire.ResourceSlice) -> set[str]:
        """Store a slice; the nodes whose devices may have changed."""
        new = slice_record(body)
        touched = self.remove_slice(new.name)
        if new.node_name is None:
            return touched
        self.slices[new.name] = new
        self._by_node[new.node_name].add(new.name)
        self._pool_nodes[(new.driver, new.pool)].add(new.node_name)
        return self._forget(touched | {new.node_name})

    def remove_slice(self, name: str) -> set[str]:
        old = self.slices.pop(name, None)
        if old is None or old.node_name is None:
            return set()
        names = self._by_node[old.node_name]
        names.discard(name)
        if not names:
            del self._by_node[old.node_name]
        if not any(
            self.slices[n].pool == old.pool and self.slices[n].driver == old.driver
            for n in self._by_node.get(old.node_name, ())
        ):
            nodes = self._pool_nodes[(old.driver, old.pool)]
            nodes.discard(old.node_name)
            if not nodes:
                del self._pool_nodes[(old.driver, old.pool)]
        return self._forget({old.node_name})

    def published(self, node: str) -> dra.Published | None:
        """The node's devices; None when no slice names it."""
        names = self._by_node.get(node)
        if not names:
            return None
        found = self._published.get(node)
        if found is None:
            found = self._published[node] = dra.published(self.slices[n] for n in sorted(names))
        return found

    def nodes_with_devices(self) -> set[str]:
        return set(self._by_node)

    # -- claims

    def _nodes_of(self, allocations: Iterable[dra.Allocation]) -> set[str]:
        nodes: set[str] = set()
        for allocation in allocations:
            nodes |= self._pool_nodes.get(allocation.key[:2], set())
        return nodes

    def upsert_claim(self, body: Mapping[str, Any] | wire.ResourceClaim) -> set[str]:
        new = claim_record(body)
        old = self.claims.get(new.uid)
        if old is not None and old.results == new.results:
            self.claims[new.uid] = new
            return set()
        touched = self.remove_claim(new.uid)
        self.claims[new.uid] = new
        for allocation in new.results:
            self._held[allocation.key].append(allocation)
        return self._forget(touched | self._nodes_of(new.results))

    def remove_claim(self, uid: str) -> set[str]:
        old = self.claims.pop(uid, None)
        if old is None:
            return set()
        for allocation in old.results:
            held = self._held.get(allocation.key)
            if held is not None:
                held[:] = [a for a in held if a != allocation]
                if not held:
                    del self._held[allocation.key]
        return self._forget(self._nodes_of(old.results))

    # -- classes

    def upsert_class(self, body: Mapping[str, Any] | wire.DeviceClass) -> set[str]:
        new = class_record(body)
        if self.classes.get(new.name) == new:
            return set()
        self.classes[new.name] = new
        self._shares.clear()
        return self.nodes_with_devices()

    def remove_class(self, name: str) -> set[str]:
        if self.classes.pop(name, None) is None:
            return set()
        self._shares.clear()
        return self.nodes_with_devices()

    # -- what the decisions read

    def share(self, node: str, classes: Sequence[str]) -> dra.DeviceShare:
        key = (node, tuple(classes))
        found = self._shares.get(key)
        if found is None:
            found = self._shares[key] = self._share(node, classes)
        return found

    def _share(self, node: str, classes: Sequence[str]) -> dra.DeviceShare:
        devices = self.published(node) or _NOTHING
        known = [self.classes[c] for c in classes if c in self.classes]
        missing = [
            ClassSelectors(c, (), f"DeviceClass {c} does not exist")
            for c in classes
            if c not in self.classes
        ]
        return dra.device_share([*known, *missing], devices, self._held)

    def unlisted(self) -> list[dra.Allocation]:
        """Allocations naming a device that no node's slices list (a driver that withdrew
        it, or a claim written by hand). They count toward no node's fill. Devices of
        slices that name no node are not read, so their claims show here too."""
        listed = {
            d.key for node in self._by_node for d in (self.published(node) or _NOTHING).devices
        }
        return [a for key, held in self._held.items() if key not in listed for a in held]

    def claims_on(self, node: str) -> list[dra.Allocation]:
        devices = self.published(node)
        if devices is None:
            return []
        return [a for d in devices.devices for a in self._held.get(d.key, ())]
