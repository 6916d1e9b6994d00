"""Reading a node's GPU facts from each source: an admin's inventory, GPU Feature
Discovery's labels, the instance-type table and DRA ResourceSlices. A source knows the
node, does not know it, or refuses (its input would make the labels lie). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from schedpolicy.core.gpu import dra
from schedpolicy.core.gpu.api import GPULabels
from schedpolicy.core.gpu.instance_table import INSTANCE_TYPES
from schedpolicy.core.gpu.products import (
    memory_agrees,
    mig_invalid,
    mig_profile_in_product,
    mig_profile_mib,
    normalize_product,
)
from schedpolicy.core.policy.matching import selector_matches
from schedpolicy.core.wellknown import (
    GFD_MEMORY,
    GFD_PRODUCT,
    GFD_REPLICAS,
    GFD_SHARING,
    INSTANCE_TYPE_LABEL,
)

SOURCE_DRA = dra.SOURCE
MIB = 1 << 20
# What one device can plausibly have, in MiB. The floor is below the smallest vGPU
# profiles (512 MiB); the ceiling, 1 TiB, is several times today's largest card (B300,
# 275040 MiB). So a figure in that range is MiB, one whose MiB are in it is bytes (256 MiB
# is 268435456 bytes, far above the ceiling), and anything else is neither.
MIN_DEVICE_MIB = 256
MAX_DEVICE_MIB = 1 << 20


@dataclass(frozen=True)
class GPUFacts:
    model: str
    memory_mib: int  # per device, before any sharing
    source: str
    detail: str


# Why a source's input would make the labels lie.
RefusalReason = Literal[
    "device-in-two-pools",
    "memory-implausible",
    "mig-devices",
    "mig-invalid",
    "mixed-devices",
    "more-devices-than-cards",
    "sharing-unknown",
    "unknown-model",
]


@dataclass(frozen=True)
class Refusal:
    """A source had input about this node, and it would make the labels lie."""

    source: str
    reason: RefusalReason  # the metric's `reason` label
    message: str


@dataclass(frozen=True)
class Sharing:
    """How the device plugin shares each device, as GFD labels it."""

    strategy: str  # none, time-slicing or mps
    replicas: int  # clients per device, at least 1

    def per_client(self, mib: int) -> int:
        # MPS caps each client's memory at an equal share; a time-sliced client may use it all.
        return mib // self.replicas if self.strategy == "mps" else mib

    def describe(self, mib: int) -> str:
        if self.strategy == "mps":
            return (
                f"sharing: MPS with {self.replicas} replicas caps each client at 1/{self.replicas}"
                f" of a device: {mib} -> {self.per_client(mib)} MiB"
            )
        return (
            f"sharing: time-slicing with {self.replicas} replicas; a client can use the whole"
            " device's memory"
        )


def read_sharing(labels: Mapping[str, str]) -> Sharing | Refusal:
    strategy = labels.get(GFD_SHARING, "")
    raw = labels.get(GFD_REPLICAS, "")
    replicas = int(raw) if raw.isdigit() and int(raw) > 0 else None
    if strategy == "mps":
        if replicas is None:
            return Refusal(
                "GPUFeatureDiscovery",
                "sharing-unknown",
                f"{GFD_SHARING}=mps but {GFD_REPLICAS}={raw or '(none)'} is not a positive"
                " count, so each client's share of a device's memory is unknown",
            )
        return Sharing("mps", replicas)
    if strategy in ("", "none", "time-slicing"):
        # GFD before MPS support had no strategy label: more than one replica was time-slicing.
        replicas = replicas or 1
        return Sharing("time-slicing" if replicas > 1 else "none", replicas)
    return Refusal(
        "GPUFeatureDiscovery",
        "sharing-unknown",
        f"{GFD_SHARING}={strategy} is a sharing strategy this version does not know, so what"
        " one client's device holds is unknown",
    )


def parse_memory(raw: str) -> tuple[int, str] | str:
    """A GFD memory figure to MiB, with how it was read; a str says why it cannot be."""
    if not raw.isdigit():
        return f"{GFD_MEMORY}={raw} is not a whole number"
    value = int(raw)
    if MIN_DEVICE_MIB <= value <= MAX_DEVICE_MIB:
        return value, "MiB"
    if MIN_DEVICE_MIB <= value // MIB <= MAX_DEVICE_MIB:
        # GFD v0.6.0 and v0.6.1 published NVML's total in bytes, which no device has in MiB.
        # NVML's totals need not be whole MiB (42505273344 on an A100 40GB): round down, as
        # nvidia-smi does.
        return value // MIB, f"bytes: {value} B = {value // MIB} MiB"
    return (
        f"{GFD_MEMORY}={raw} is neither plausible MiB ({MIN_DEVICE_MIB}..{MAX_DEVICE_MIB}) nor"
        f" plausible bytes ({MIN_DEVICE_MIB}..{MAX_DEVICE_MIB} MiB)"
    )


def from_inventory(spec: GPULabels, labels: Mapping[str, str]) -> GPUFacts | str:
    for i, entry in enumerate(spec.inventory or []):
        if selector_matches(entry.node_selector, labels):
            return GPUFacts(
                entry.model, entry.memory_mib, "Inventory", f"inventory[{i}] selects this node"
            )
    return "no inventory entry selects this node"


def from_feature_discovery(labels: Mapping[str, str]) -> GPUFacts | Refusal | str:
    source = "GPUFeatureDiscovery"
    product = labels.get(GFD_PRODUCT)
    if product is None:
        return f"no {GFD_PRODUCT} label"
    if mig_invalid(product):
        return Refusal(
            source,
            "mig-invalid",
            f"{GFD_PRODUCT}={product}: GFD reports a MIG layout the device plugin cannot"
            " serve, so no device size is known",
        )
    model = normalize_product(product)
    if model is None:
        return Refusal(source, "unknown-model", f"{GFD_PRODUCT}={product} names no GPU model")
    mig = mig_profile_in_product(product)
    memory = labels.get(GFD_MEMORY)
    reported: int | None = None
    unit = ""
    if memory is not None:
        parsed = parse_memory(memory)
        if isinstance(parsed, str):
            return Refusal(source, "memory-implausible", parsed)
        reported, unit = parsed
    detail = f"{GFD_PRODUCT}={product}, {GFD_MEMORY}={memory or '(none)'}"
    if unit != "MiB" and reported is not None:
        detail += f" read as {unit}"
    if mig is not None:
        # The profile names the slice's memory ("1g.5gb"); a memory label that says more is
        # the whole card's, which a pod on one MIG device never gets. Take the smaller.
        profile_mib = mig_profile_mib(mig)
        assert profile_mib is not None  # mig_profile_in_product matched the same pattern
        mib = min(reported, profile_mib) if reported is not None else profile_mib
        detail += f"; MIG device {mig}: memory is the MIG device's, not the card's"
    elif reported is not None:
        mib = reported
    else:
        return f"no {GFD_MEMORY} label"
    return GPUFacts(model, mib, source, detail)


def from_instance_type(
    labels: Mapping[str, str], allocatable_gpus: int, sharing: Sharing
) -> GPUFacts | Refusal | str:
    source = "InstanceType"
    itype = labels.get(INSTANCE_TYPE_LABEL)
    if itype is None:
        return f"no {INSTANCE_TYPE_LABEL} label"
    entry = INSTANCE_TYPES.get(itype)
    if entry is None:
        return f"instance type {itype} is not in the table"
    product = labels.get(GFD_PRODUCT, "")
    if mig_invalid(product):
        return Refusal(
            source,
            "mig-invalid",
            f"{GFD_PRODUCT}={product}: the cards are in a MIG state GFD calls invalid, and"
            f" the table's {entry.memory_mib} MiB is a whole card's",
        )
    if (mig := mig_profile_in_product(product)) is not None:
        return Refusal(
            source,
            "mig-devices",
            f"{GFD_PRODUCT}={product}: the devices are MIG {mig} slices, and"
            f" the table's {entry.memory_mib} MiB is a whole card's",
        )
    devices = -(-allocatable_gpus // sharing.replicas)
    if devices > entry.count:
        shared = f" over {sharing.replicas} replicas" if sharing.replicas > 1 else ""
        return Refusal(
            source,
            "more-devices-than-cards",
            f"{allocatable_gpus} nvidia.com/gpu allocatable{shared} is more than the"
            f" {entry.count} cards of a {itype}: the devices are MIG slices or shared, and the"
            " table knows whole cards only",
        )
    return GPUFacts(entry.model, entry.memory_mib, source, f"{INSTANCE_TYPE_LABEL}={itype}")


def dra_gpus(devices: dra.Published | None) -> list[dra.Device]:
    """The node's published devices of GPU drivers."""
    return [d for d in devices.devices if d.driver in dra.GPU_DRIVERS] if devices else []


def dra_full_gpus(devices: dra.Published | None) -> int:
    return sum(1 for d in dra_gpus(devices) if d.attribute("type") in (None, "gpu"))


def _device_memory(device: dra.Device) -> int | str:
    raw = device.capacity_of("memory")
    if raw is None:
        return f"device {device.name} has no memory capacity"
    amount = dra.capacity_bytes(raw)
    if amount is None:
        return f"device {device.name}: capacity memory={raw!r} is not a quantity"
    mib = amount // MIB
    if not MIN_DEVICE_MIB <= mib <= MAX_DEVICE_MIB:
        return (
            f"device {device.name}: capacity memory={raw} is {mib} MiB, outside what one"
            f" device plausibly has ({MIN_DEVICE_MIB}..{MAX_DEVICE_MIB} MiB)"
        )
    return mib


def _device_facts(
    device: dra.Device, by_uuid: Mapping[str, dra.Device]
) -> tuple[str, int, str] | Refusal:
    """One device's model, memory and how they were read; a MIG device takes its model
    from its parent GPU when it does not carry one."""
    product = device.attribute("productName")
    mig = device.attribute("type") == "mig"
    if product is None and mig:
        parent = by_uuid.get(str(device.attribute("parentUUID") or ""))
        product = parent.attribute("productName") if parent is not None else None
    if not isinstance(product, str) or not product.strip():
        return Refusal(
            SOURCE_DRA,
            "unknown-model",
            f"ResourceSlice {device.slice}: device {device.name} has no productName",
        )
    model = normalize_product(product)
    if model is None:
        return Refusal(
            SOURCE_DRA,
            "unknown-model",
            f"ResourceSlice {device.slice}: device {device.name} productName={product!r}"
            " names no GPU model",
        )
    mib = _device_memory(device)
    profile = device.attribute("profile")
    profile_mib = mig_profile_mib(profile) if mig and isinstance(profile, str) else None
    if profile_mib is not None:
        # A capacity that says more than the profile is the card's.
        mib = min(mib, profile_mib) if isinstance(mib, int) else profile_mib
    if isinstance(mib, str):
        return Refusal(SOURCE_DRA, "memory-implausible", f"ResourceSlice {device.slice}: {mib}")
    kind = f"MIG {profile}" if mig else "GPU"
    return model, mib, f"{kind} {device.name}: productName={product!r}"


def from_resource_slices(devices: dra.Published | None) -> GPUFacts | Refusal | str:
    """Model and memory from the node's DRA GPU devices. Every device must read, and all
    must agree: the labels describe the one device a pod gets, so a node that publishes
    two kinds (or MIG slices of two profiles) has no one answer."""
    gpus = dra_gpus(devices)
    if not gpus:
        return f"no ResourceSlice publishes {', '.join(dra.GPU_DRIVERS)} devices for this node"
    assert devices is not None
    if devices.problems:
        return Refusal(SOURCE_DRA, "device-in-two-pools", "; ".join(devices.problems))
    migs = [d for d in gpus if d.attribute("type") == "mig"]
    chosen = migs or [d for d in gpus if d.attribute("type") in (None, "gpu")]
    if not chosen:
        kinds = sorted({str(d.attribute("type")) for d in gpus})
        return f"the {', '.join(dra.GPU_DRIVERS)} devices are of types {kinds}, none a GPU"
    by_uuid = {str(d.attribute("uuid")): d for d in gpus if d.attribute("uuid")}
    read: list[tuple[str, int, str]] = []
    for device in chosen:
        found = _device_facts(device, by_uuid)
        if isinstance(found, Refusal):
            return found
        read.append(found)
    model, mib, detail = min(read, key=lambda r: r[1])
    sizes = sorted({(m, b) for m, b, _ in read})
    if any(m != model for m, _ in sizes) or not all(memory_agrees(b, mib) for _, b in sizes):
        listed = ", ".join(f"{m}/{b} MiB" for m, b in sizes)
        return Refusal(
            SOURCE_DRA,
            "mixed-devices",
            f"the node publishes devices of more than one kind ({listed}), and one label"
            " cannot describe them",
        )
    slices = sorted({d.slice for d in chosen})
    return GPUFacts(
        model,
        mib,
        SOURCE_DRA,
        f"ResourceSlice {', '.join(slices)}: {len(chosen)} device(s), {detail}, memory {mib} MiB",
    )


def disagree(a: GPUFacts, b: GPUFacts) -> bool:
    return a.model != b.model or not memory_agrees(a.memory_mib, b.memory_mib)
