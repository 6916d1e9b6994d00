"""GPU node labels: what a node should carry, and how to get there safely. Pure.

`decide` turns a node's facts into the desired `<prefix>/gpu-model` and
`<prefix>/gpu-memory-mib` (the memory one pod's device gives it, in MiB), trying the
policy's sources in order. A source either knows the node, does not know it, or
refuses: it has input, but input that would make the labels lie (a memory figure in
no plausible unit, a MIG state GFD calls invalid, more devices than the instance type
has cards). A node no source labels, and that some source refused, carries no label
and says why: `LabelDecision.refusals`.

`plan` turns the desired labels into a change that touches only labels we own, the
way Node Feature Discovery does: the keys we set are listed in the node annotation
`schedpolicy.io/owned-labels`, and anything else is somebody else's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from schedpolicy.core import dra
from schedpolicy.core.api import DNS_SUBDOMAIN, GPULabels, is_reserved_label_domain
from schedpolicy.core.matching import selector_matches
from schedpolicy.core.wellknown import (
    FIELD_MANAGER,
    GFD_MEMORY,
    GFD_PRODUCT,
    GFD_REPLICAS,
    GFD_SHARING,
    INSTANCE_TYPE_LABEL,
    OWNED_LABELS_ANNOTATION,
)

SOURCE_DRA = dra.SOURCE
MODEL_KEY = "gpu-model"
MEMORY_KEY = "gpu-memory-mib"
# Sources that disagree by less than this on memory agree: NVML counts what the driver leaves
# usable, EC2 the card's size. ECC on GDDR cards keeps 1/16 back (a T4 shows 15109 MiB of
# EC2's 16384, 7.8% less); a real disagreement is another size class (40 GB against 80 GB).
MEMORY_TOLERANCE = 0.10
MIB = 1 << 20
# What one device can plausibly have, in MiB. The floor is below the smallest vGPU
# profiles (512 MiB); the ceiling, 1 TiB, is several times today's largest card (B300,
# 275040 MiB). So a figure in that range is MiB, one whose MiB are in it is bytes (256 MiB
# is 268435456 bytes, far above the ceiling), and anything else is neither.
MIN_DEVICE_MIB = 256
MAX_DEVICE_MIB = 1 << 20


# ---- the EC2 instance-type table -----------------------------------------------------------


@dataclass(frozen=True)
class InstanceGPUs:
    model: str
    count: int  # whole cards in one instance
    memory_mib: int  # per card


def _family(prefix: str, model: str, mib: int, sizes: Mapping[str, int]) -> dict[str, InstanceGPUs]:
    return {f"{prefix}.{size}": InstanceGPUs(model, count, mib) for size, count in sizes.items()}


# GPU count and MiB per GPU as EC2's DescribeInstanceTypes reports them (GpuInfo), for
# NVIDIA instance types only: this table knows EC2 and nothing else. Models are spelled as
# `normalize_product` spells GFD's names, so that the two sources can agree. Left out:
# p6e-gb200 (sold as UltraServers), and g6f/gr6f, whose fractional L4s EC2 lists with a
# GPU count of 0.
# fmt: off
_SINGLE = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
_ONE_TO_EIGHT = {**dict.fromkeys(_SINGLE, 1), "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}
_G7 = {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2, "24xlarge": 4, "48xlarge": 8}
INSTANCE_TYPES: Mapping[str, InstanceGPUs] = {
    **_family("p2", "K80", 12288, {"xlarge": 1, "8xlarge": 8, "16xlarge": 16}),
    **_family("g3", "M60", 8192, {"4xlarge": 1, "8xlarge": 2, "16xlarge": 4}),
    **_family("g3s", "M60", 8192, {"xlarge": 1}),
    **_family("p3", "V100", 16384, {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    **_family("p3dn", "V100", 32768, {"24xlarge": 8}),
    **_family("g4dn", "T4", 16384, {**dict.fromkeys(_SINGLE, 1), "12xlarge": 4, "metal": 8}),
    **_family("g5g", "T4G", 16384, {**dict.fromkeys(_SINGLE[:4], 1), "16xlarge": 2, "metal": 2}),
    **_family("g5", "A10G", 22888, _ONE_TO_EIGHT),
    **_family("g6", "L4", 22888, _ONE_TO_EIGHT),
    **_family("gr6", "L4", 22888, {"4xlarge": 1, "8xlarge": 1}),
    **_family("g6e", "L40S", 45776, _ONE_TO_EIGHT),
    **_family("g7", "RTX-PRO-4500-Blackwell", 32768, _G7),
    **_family("g7e", "RTX-PRO-6000-Blackwell", 98304, _G7),
    **_family("p4d", "A100", 40960, {"24xlarge": 8}),
    **_family("p4de", "A100", 81920, {"24xlarge": 8}),
    **_family("p5", "H100", 81920, {"4xlarge": 1, "48xlarge": 8}),
    **_family("p5e", "H200", 144384, {"48xlarge": 8}),
    **_family("p5en", "H200", 144384, {"48xlarge": 8}),
    **_family("p6-b200", "B200", 183359, {"48xlarge": 8}),
    **_family("p6-b300", "B300", 275040, {"48xlarge": 8}),
}
# fmt: on


# ---- product names --------------------------------------------------------------------------

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# GFD appends `-MIG-<profile>` under MIG single (a compute-instance profile may lead:
# 1c.2g.10gb) and `-MIG-INVALID` when the node's MIG layout breaks that strategy.
_MIG = re.compile(r"[-_]MIG[-_](?:\d+c\.)?(?P<profile>\d+g\.(?P<gb>\d+)gb)", re.IGNORECASE)
_MIG_INVALID = re.compile(r"[-_]MIG[-_]INVALID\b", re.IGNORECASE)
_MIG_ANY = re.compile(r"[-_]MIG[-_]", re.IGNORECASE)
_SHARED = re.compile(r"[-_]SHARED$", re.IGNORECASE)
# Brand words in front of the model: NVIDIA-Tesla-V100, GRID-T4-16Q (a vGPU profile).
_BRANDS = {"nvidia", "tesla", "geforce", "quadro", "grid"}
# Words that name a product line, not a GPU: they join the word after them (RTX-4090,
# GT-710, RTX-PRO-6000, TITAN-RTX).
_SERIES = {"rtx", "gtx", "gt", "gts", "titan", "pro"}
# Words after the model number that make it another product, often with other memory
# (RTX 6000 has 24 GB, RTX 6000 Ada 48 GB). Everything else there is form factor, memory
# size, interconnect or a vGPU profile, and is dropped.
_QUALIFIERS = {q.lower(): q for q in ("Ti", "SUPER", "Ada", "Blackwell", "D", "Laptop", "SFF")}
# What NVML answers for a device it cannot name.
_PLACEHOLDERS = {("graphics", "device"), ("device",), ("unknown",)}


def normalize_product(product: str) -> str | None:
    """GFD product string to a short model: NVIDIA-A100-SXM4-80GB -> A100.

    The product line stays (RTX-4090, GT-710, RTX-PRO-6000), and so do the words that make
    it another card (RTX-3090-Ti, RTX-6000-Ada); form factor, memory size, interconnect,
    vGPU profile, MIG and sharing suffixes go. None for a placeholder or nothing left.
    """
    name = _MIG_ANY.split(product, maxsplit=1)[0]
    name = _SHARED.sub("", name)
    tokens = [t for t in re.split(r"[-_ ]+", name) if t]
    while tokens and tokens[0].lower() in _BRANDS:
        tokens = tokens[1:]
    if not tokens or tuple(t.lower() for t in tokens) in _PLACEHOLDERS:
        return None
    words: list[str] = []
    rest = iter(tokens)
    for token in rest:
        if token.lower() in _SERIES:
            words.append(token.upper())
            continue
        words.append(token)
        break
    words += [_QUALIFIERS[t.lower()] for t in rest if t.lower() in _QUALIFIERS]
    model = "-".join(words)
    return model if _LABEL_VALUE.match(model) and len(model) <= 63 else None


# ---- reading the sources --------------------------------------------------------------------


@dataclass(frozen=True)
class GPUFacts:
    model: str
    memory_mib: int  # per device, before any sharing
    source: str
    detail: str


@dataclass(frozen=True)
class Refusal:
    """A source had input about this node, and it would make the labels lie."""

    source: str
    reason: str  # a short kebab-case word: the metric's `reason` label
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
    if _MIG_INVALID.search(product):
        return Refusal(
            source,
            "mig-invalid",
            f"{GFD_PRODUCT}={product}: GFD reports a MIG layout the device plugin cannot"
            " serve, so no device size is known",
        )
    model = normalize_product(product)
    if model is None:
        return Refusal(source, "unknown-model", f"{GFD_PRODUCT}={product} names no GPU model")
    mig = _MIG.search(product)
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
        profile_mib = int(mig.group("gb")) * 1024
        mib = min(reported, profile_mib) if reported is not None else profile_mib
        detail += f"; MIG device {mig.group('profile')}: memory is the MIG device's, not the card's"
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
    if _MIG_INVALID.search(product):
        return Refusal(
            source,
            "mig-invalid",
            f"{GFD_PRODUCT}={product}: the cards are in a MIG state GFD calls invalid, and"
            f" the table's {entry.memory_mib} MiB is a whole card's",
        )
    if (mig := _MIG.search(product)) is not None:
        return Refusal(
            source,
            "mig-devices",
            f"{GFD_PRODUCT}={product}: the devices are MIG {mig.group('profile')} slices, and"
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
    if mig and isinstance(profile, str) and (m := re.match(r"^(?:\d+c\.)?\d+g\.(\d+)gb$", profile)):
        # The profile names the slice's memory; a capacity that says more is the card's.
        profile_mib = int(m.group(1)) * 1024
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
    if any(m != model for m, _ in sizes) or any(
        abs(b - mib) > MEMORY_TOLERANCE * max(b, mib) for _, b in sizes
    ):
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


def _disagree(a: GPUFacts, b: GPUFacts) -> bool:
    if a.model != b.model:
        return True
    return abs(a.memory_mib - b.memory_mib) > MEMORY_TOLERANCE * max(a.memory_mib, b.memory_mib)


# ---- the decision ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelDecision:
    labels: Mapping[str, str]  # desired labels; empty for a node that gets none
    facts: GPUFacts | None
    explanation: tuple[str, ...]
    disagreements: tuple[str, ...] = ()
    error: str | None = None  # the policy itself cannot label (a reserved prefix)
    refusals: tuple[Refusal, ...] = ()  # why a node with GPU input gets no label


def label_keys(spec: GPULabels) -> tuple[str, str]:
    return (f"{spec.label_prefix}/{MODEL_KEY}", f"{spec.label_prefix}/{MEMORY_KEY}")


def _refused(lines: list[str], refusals: tuple[Refusal, ...]) -> LabelDecision:
    why = "; ".join(f"{r.source} refused ({r.reason})" for r in refusals)
    return LabelDecision({}, None, (*lines, f"no label: {why}"), refusals=refusals)


def parse_admitted(raw: str) -> frozenset[str]:
    """The admission guard's prefixes as the chart passes them: comma-separated."""
    prefixes = frozenset(p.strip() for p in raw.split(",") if p.strip())
    if not prefixes:
        raise ValueError("must list at least one label prefix, such as schedpolicy.io")
    for prefix in sorted(prefixes):
        if len(prefix) > 253 or not re.match(DNS_SUBDOMAIN, prefix):
            raise ValueError(f"{prefix!r} is not a DNS subdomain, such as schedpolicy.io")
        if is_reserved_label_domain(prefix):
            raise ValueError(f"{prefix} is reserved for Kubernetes")
    return prefixes


def prefix_refusal(spec: GPULabels, admitted: frozenset[str] | None) -> str | None:
    """Why labels under this policy's prefix must not be written, if they must not.

    `admitted` is the admission guard's list (None: not told, write and let the apiserver
    judge). The guard matches `<prefix>/` on each key, so only an exact entry admits."""
    prefix = spec.label_prefix
    if is_reserved_label_domain(prefix):
        # CEL refuses this prefix; this is the second line, for a policy that bypassed it.
        return f"label prefix {prefix} is reserved for Kubernetes; refusing to label"
    if admitted is not None and prefix not in admitted:
        return (
            f"label prefix {prefix} is not one the admission guard lets the controller write"
            f" ({', '.join(sorted(admitted)) or 'none'}); refusing to label: add it to"
            " security.admissionGuard.nodeLabelPrefixes"
        )
    return None


def decide(
    spec: GPULabels,
    labels: Mapping[str, str],
    allocatable_gpus: int,
    admitted: frozenset[str] | None = None,
    devices: dra.Published | None = None,
) -> LabelDecision:
    error = prefix_refusal(spec, admitted)
    if error is not None:
        return LabelDecision({}, None, (error,), error=error)
    dra_count = dra_full_gpus(devices)
    if allocatable_gpus <= 0 and not dra_gpus(devices):
        why = "status.allocatable has no nvidia.com/gpu and no ResourceSlice publishes GPUs"
        return LabelDecision({}, None, (f"{why}: not a GPU node",))
    lines: list[str] = []
    sharing = read_sharing(labels)
    if isinstance(sharing, Refusal):
        return _refused([f"sharing: {sharing.message}"], (sharing,))
    readers: dict[str, Callable[[], GPUFacts | Refusal | str]] = {
        "Inventory": lambda: from_inventory(spec, labels),
        "GPUFeatureDiscovery": lambda: from_feature_discovery(labels),
        "InstanceType": lambda: from_instance_type(
            labels, max(allocatable_gpus, dra_count), sharing
        ),
        "DRA": lambda: from_resource_slices(devices),
    }
    found: list[GPUFacts] = []
    refusals: list[Refusal] = []
    for source in spec.sources:
        result = readers[source]()
        if isinstance(result, str):
            lines.append(f"{source}: {result}")
        elif isinstance(result, Refusal):
            lines.append(f"{source}: refused ({result.reason}): {result.message}")
            refusals.append(result)
        else:
            lines.append(f"{source}: {result.model}, {result.memory_mib} MiB ({result.detail})")
            found.append(result)
    if not found:
        if refusals:
            return _refused(lines, tuple(refusals))
        return LabelDecision({}, None, (*lines, "no source knows this node's GPUs"))
    winner = found[0]
    disagreements = tuple(
        f"{other.source} says {other.model}/{other.memory_mib} MiB, {winner.source} says"
        f" {winner.model}/{winner.memory_mib} MiB; {winner.source} comes first"
        for other in found[1:]
        if _disagree(winner, other)
    )
    mib = sharing.per_client(winner.memory_mib)
    if sharing.strategy != "none":
        lines.append(sharing.describe(winner.memory_mib))
    model_key, memory_key = label_keys(spec)
    desired = {model_key: winner.model, memory_key: str(mib)}
    lines.append(f"{winner.source} wins: {model_key}={winner.model}, {memory_key}={mib}")
    return LabelDecision(desired, winner, tuple(lines), disagreements)


# ---- the change ---------------------------------------------------------------------------


def parse_owned(annotations: Mapping[str, str]) -> frozenset[str]:
    raw = annotations.get(OWNED_LABELS_ANNOTATION, "")
    return frozenset(k for k in raw.split(",") if k)


@dataclass(frozen=True)
class LabelPlan:
    set: Mapping[str, str] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()  # the owned-labels annotation afterwards
    owned_changed: bool = False
    conflicts: tuple[str, ...] = ()  # labels of someone else's that we want but leave alone

    @property
    def empty(self) -> bool:
        return not (self.set or self.remove or self.owned_changed)


def plan(
    desired: Mapping[str, str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    label_managers: Mapping[str, frozenset[str]],
    allow_overwrite: bool,
) -> LabelPlan:
    owned = set(parse_owned(annotations))
    # A key we once set that another manager has since taken over is theirs now.
    for key in list(owned):
        if key in labels and FIELD_MANAGER not in label_managers.get(key, frozenset()):
            owned.discard(key)
    to_set: dict[str, str] = {}
    to_remove: list[str] = []
    conflicts: list[str] = []
    for key, value in sorted(desired.items()):
        if is_reserved_label_domain(key.split("/", 1)[0]) and "/" in key:
            continue  # never, whatever the policy says
        current = labels.get(key)
        if current == value:
            continue
        if current is None or key in owned or allow_overwrite:
            to_set[key] = value
            owned.add(key)
        else:
            conflicts.append(f"{key}={current} was set by someone else; wanted {value}")
    for key in sorted(owned - set(desired)):
        if key in labels:
            to_remove.append(key)
        owned.discard(key)
    new_owned = tuple(sorted(owned))
    return LabelPlan(
        set=to_set,
        remove=tuple(to_remove),
        owned=new_owned,
        owned_changed=new_owned != tuple(sorted(parse_owned(annotations))),
        conflicts=tuple(conflicts),
    )
