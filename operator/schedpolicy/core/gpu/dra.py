"""Dynamic Resource Allocation, as far as GPU labels and GPU fill need it. Pure.

A DRA driver publishes a node's devices in ResourceSlices, one pool per node for the
NVIDIA driver (`gpu.nvidia.com`, pool named after the node). A pool may span several
slices, and a driver that republishes it raises the pool's generation: only the slices of
the newest generation count, as in the scheduler. An allocated ResourceClaim names its
devices by (driver, pool, device).

Two things are read here:
- `gpu_facts`: model and memory from the node's GPU devices, the fourth label source;
- `device_share`: how many of a node's devices of some device classes are allocated,
  and to which claims, for NodeConsolidation's GPU fill.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from schedpolicy.core.gpu.device_selectors import ClassSelectors, DeviceView, Value
from schedpolicy.core.resources import QuantityError, parse_quantity

# Drivers whose devices are GPUs this version can label; their attributes are read as
# NVIDIA's k8s-dra-driver-gpu publishes them.
GPU_DRIVERS = ("gpu.nvidia.com",)
SOURCE = "DRA"
MIB = 1 << 20
# The scheduler marks the claim it makes for a DRA-backed extended-resource request (a
# DeviceClass with extendedResourceName) with this annotation. Such a pod also requests
# the extended resource, which fill already counts: the claim must not count again.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

DeviceKey = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    slice: str
    attributes: Mapping[str, Value]  # as published: short names, or qualified domain/name
    capacity: Mapping[str, str]  # name -> quantity, as published

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)

    def attribute(self, name: str) -> Value | None:
        """A short name is in the driver's domain; a qualified one names its own."""
        found = self.attributes.get(name)
        return found if found is not None else self.attributes.get(f"{self.driver}/{name}")

    def capacity_of(self, name: str) -> str | None:
        found = self.capacity.get(name)
        return found if found is not None else self.capacity.get(f"{self.driver}/{name}")

    def view(self) -> DeviceView:
        domains: dict[str, dict[str, Value]] = defaultdict(dict)
        for key, value in self.attributes.items():
            domain, _, short = key.rpartition("/")
            domains[domain or self.driver][short] = value
        return DeviceView(self.driver, domains)


@dataclass(frozen=True)
class Slice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # resourceSliceCount: how many slices make the pool's generation
    node_name: str | None
    devices: tuple[Device, ...]


@dataclass(frozen=True)
class Published:
    """A node's devices, from the newest generation of each of its pools."""

    devices: tuple[Device, ...]
    problems: tuple[str, ...] = ()  # devices listed twice, or in two pools
    incomplete: tuple[str, ...] = ()  # pools with fewer slices than they announce

    def by_key(self) -> dict[DeviceKey, Device]:
        return {d.key: d for d in self.devices}


def published(slices: Iterable[Slice]) -> Published:
    pools: dict[tuple[str, str], list[Slice]] = defaultdict(list)
    for s in slices:
        pools[(s.driver, s.pool)].append(s)
    devices: list[Device] = []
    problems: list[str] = []
    incomplete: list[str] = []
    seen: dict[DeviceKey, str] = {}
    uuids: dict[tuple[str, str], Device] = {}
    for (driver, pool), members in sorted(pools.items()):
        newest = max(s.generation for s in members)
        current = sorted((s for s in members if s.generation == newest), key=lambda s: s.name)
        if len(current) < max(s.slice_count for s in current):
            incomplete.append(
                f"pool {driver}/{pool} generation {newest}: {len(current)} of"
                f" {max(s.slice_count for s in current)} slices published"
            )
        for s in current:
            for device in s.devices:
                if device.key in seen:
                    problems.append(
                        f"device {device.name} of pool {driver}/{pool} is listed in slices"
                        f" {seen[device.key]} and {s.name}"
                    )
                    continue
                seen[device.key] = s.name
                uuid = device.attribute("uuid")
                if isinstance(uuid, str) and uuid:
                    other = uuids.get((driver, uuid))
                    if other is not None and other.pool != pool:
                        problems.append(
                            f"device {uuid} is listed in two pools: {other.pool}/{other.name}"
                            f" and {pool}/{device.name}"
                        )
                    uuids.setdefault((driver, uuid), device)
                devices.append(device)
    return Published(tuple(devices), tuple(problems), tuple(incomplete))


# ---- GPU fill ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Allocation:
    claim: str  # namespace/name
    request: str
    key: DeviceKey
    extended: bool = False  # by the scheduler's claim for an extended-resource request


@dataclass(frozen=True)
class Claim:
    uid: str
    namespace: str
    name: str
    results: tuple[Allocation, ...]


@dataclass(frozen=True)
class DeviceShare:
    """A node's devices of some device classes, and which of them claims hold."""

    classes: tuple[str, ...]
    published: tuple[DeviceKey, ...]
    allocated: tuple[Allocation, ...]  # counted: allocations by ordinary claims
    extended: tuple[Allocation, ...] = ()  # not counted: their pods' requests already are
    unread: tuple[str, ...] = ()  # classes whose selectors this version cannot evaluate
    incomplete: tuple[str, ...] = ()

    def describe(self) -> str:
        names = ", ".join(self.classes)
        words = f"DRA {len(self.allocated)} of {len(self.published)} devices of {names}"
        held = [f"{a.claim} -> {a.key[1]}/{a.key[2]}" for a in self.allocated]
        if held:
            words += f" ({'; '.join(held)})"
        if self.extended:
            words += (
                f"; {len(self.extended)} more held for extended-resource requests, counted"
                " as those requests"
            )
        for why in (*self.unread, *self.incomplete):
            words += f"; {why}"
        return words


def device_share(
    classes: Sequence[ClassSelectors],
    devices: Published,
    allocated: Mapping[DeviceKey, Sequence[Allocation]],
) -> DeviceShare:
    """The node's devices some class selects, and the allocations among them. A device
    two claims hold (shared devices) counts once: fill is about devices, not claims."""
    chosen = [d for d in devices.devices if any(c.selects(d.view()) for c in classes)]
    held: list[Allocation] = []
    extended: list[Allocation] = []
    for device in chosen:
        allocations = allocated.get(device.key, ())
        if not allocations:
            continue
        first = allocations[0]
        (extended if first.extended else held).append(first)
    return DeviceShare(
        classes=tuple(c.name for c in classes),
        published=tuple(d.key for d in chosen),
        allocated=tuple(held),
        extended=tuple(extended),
        unread=tuple(c.error for c in classes if c.error is not None),
        incomplete=devices.incomplete,
    )


def capacity_bytes(raw: str) -> int | None:
    try:
        return int(parse_quantity(raw))
    except QuantityError:
        return None
