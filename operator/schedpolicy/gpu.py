"""GPU node labels: what a node should carry, and how to get there safely. Pure.

`decide` turns a node's facts into the desired `<prefix>/gpu-model` and
`<prefix>/gpu-memory-mib` (memory per device, in MiB), trying the policy's
sources in order. `plan` turns the desired labels into a change that touches
only labels we own, the way Node Feature Discovery does: the keys we set are
listed in the node annotation `schedpolicy.io/owned-labels`, and anything else
is somebody else's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from schedpolicy.api import FIELD_MANAGER, GPULabels, is_reserved_label_domain
from schedpolicy.matching import selector_matches

GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_MEMORY = "nvidia.com/gpu.memory"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
OWNED_ANNOTATION = "schedpolicy.io/owned-labels"
MODEL_KEY = "gpu-model"
MEMORY_KEY = "gpu-memory-mib"
# Sources that disagree by less than this on memory agree: NVML and EC2 count a few MiB apart.
MEMORY_TOLERANCE = 0.05

# MiB per GPU as EC2 reports it, by instance-type pattern.
INSTANCE_TYPES: tuple[tuple[str, str, int], ...] = (
    ("g4dn.*", "T4", 16384),
    ("g5.*", "A10G", 22888),
    ("g6.*", "L4", 22888),
    ("g6e.*", "L40S", 45776),
    ("p4d.24xlarge", "A100", 40960),
    ("p4de.24xlarge", "A100", 81920),
    ("p5.48xlarge", "H100", 81920),
    ("p5e.48xlarge", "H200", 144384),
    ("p5en.48xlarge", "H200", 144384),
)

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VENDOR = re.compile(r"^(NVIDIA[-_ ])?(Tesla[-_ ])?", re.IGNORECASE)
_MIG = re.compile(r"[-_]MIG[-_](?P<profile>\d+g\.(?P<gb>\d+)gb)", re.IGNORECASE)
_FAMILIES = {"geforce", "quadro", "nvidia", "tesla"}
_PREFIXED_SERIES = {"rtx", "gtx"}


def normalize_product(product: str) -> str | None:
    """GFD product string to a short model: NVIDIA-A100-SXM4-80GB -> A100.

    Form factor, memory size, interconnect and MIG suffixes are dropped; GeForce and
    Quadro keep their series (NVIDIA-GeForce-RTX-4090 -> RTX-4090). None when nothing
    sensible is left.
    """
    name = _MIG.split(product, maxsplit=1)[0]
    name = _VENDOR.sub("", name)
    tokens = [t for t in re.split(r"[-_ ]+", name) if t]
    while tokens and tokens[0].lower() in _FAMILIES:
        tokens = tokens[1:]
    if not tokens:
        return None
    model = tokens[0]
    if model.lower() in _PREFIXED_SERIES and len(tokens) > 1:
        model = f"{model.upper()}-{tokens[1]}"
    return model if _LABEL_VALUE.match(model) and len(model) <= 63 else None


@dataclass(frozen=True)
class GPUFacts:
    model: str
    memory_mib: int
    source: str
    detail: str


def from_inventory(spec: GPULabels, labels: Mapping[str, str]) -> GPUFacts | str:
    for i, entry in enumerate(spec.inventory or []):
        if selector_matches(entry.node_selector, labels):
            return GPUFacts(
                entry.model, entry.memory_mib, "Inventory", f"inventory[{i}] selects this node"
            )
    return "no inventory entry selects this node"


def from_feature_discovery(labels: Mapping[str, str]) -> GPUFacts | str:
    product = labels.get(GFD_PRODUCT)
    if product is None:
        return f"no {GFD_PRODUCT} label"
    model = normalize_product(product)
    if model is None:
        return f"{GFD_PRODUCT}={product} names no known model"
    mig = _MIG.search(product)
    memory = labels.get(GFD_MEMORY, "")
    reported = int(memory) if memory.isdigit() and int(memory) > 0 else None
    if mig is not None:
        # The profile names the slice's memory ("1g.5gb"); a memory label that says more is
        # the whole card's, which a pod on one MIG device never gets. Take the smaller.
        profile_mib = int(mig.group("gb")) * 1024
        mib = min(reported, profile_mib) if reported is not None else profile_mib
    elif reported is not None:
        mib = reported
    else:
        return f"{GFD_MEMORY} is missing or not a number"
    detail = f"{GFD_PRODUCT}={product}, {GFD_MEMORY}={memory or '(none)'}"
    if mig is not None:
        detail += f"; MIG device {mig.group('profile')}: memory is the MIG device's, not the card's"
    return GPUFacts(model, mib, "GPUFeatureDiscovery", detail)


def from_instance_type(labels: Mapping[str, str]) -> GPUFacts | str:
    itype = labels.get(INSTANCE_TYPE)
    if itype is None:
        return f"no {INSTANCE_TYPE} label"
    for pattern, model, mib in INSTANCE_TYPES:
        if fnmatchcase(itype, pattern):
            return GPUFacts(
                model, mib, "InstanceType", f"{INSTANCE_TYPE}={itype} matches {pattern}"
            )
    return f"instance type {itype} is not in the table"


def _disagree(a: GPUFacts, b: GPUFacts) -> bool:
    if a.model != b.model:
        return True
    return abs(a.memory_mib - b.memory_mib) > MEMORY_TOLERANCE * max(a.memory_mib, b.memory_mib)


@dataclass(frozen=True)
class LabelDecision:
    labels: Mapping[str, str]  # desired labels; empty for a node that gets none
    facts: GPUFacts | None
    explanation: tuple[str, ...]
    disagreements: tuple[str, ...] = ()
    error: str | None = None


def label_keys(spec: GPULabels) -> tuple[str, str]:
    return (f"{spec.label_prefix}/{MODEL_KEY}", f"{spec.label_prefix}/{MEMORY_KEY}")


def decide(spec: GPULabels, labels: Mapping[str, str], allocatable_gpus: int) -> LabelDecision:
    if is_reserved_label_domain(spec.label_prefix):
        # CEL refuses this prefix; this is the second line, for a policy that bypassed it.
        error = f"label prefix {spec.label_prefix} is reserved for Kubernetes; refusing to label"
        return LabelDecision({}, None, (error,), error=error)
    if allocatable_gpus <= 0:
        return LabelDecision(
            {}, None, ("status.allocatable has no nvidia.com/gpu: not a GPU node",)
        )
    readers = {
        "Inventory": lambda: from_inventory(spec, labels),
        "GPUFeatureDiscovery": lambda: from_feature_discovery(labels),
        "InstanceType": lambda: from_instance_type(labels),
    }
    lines: list[str] = []
    found: list[GPUFacts] = []
    for source in spec.sources:
        result = readers[source]()
        if isinstance(result, str):
            lines.append(f"{source}: {result}")
        else:
            lines.append(f"{source}: {result.model}, {result.memory_mib} MiB ({result.detail})")
            found.append(result)
    if not found:
        return LabelDecision({}, None, (*lines, "no source knows this node's GPUs"))
    winner = found[0]
    disagreements = tuple(
        f"{other.source} says {other.model}/{other.memory_mib} MiB, {winner.source} says"
        f" {winner.model}/{winner.memory_mib} MiB; {winner.source} comes first"
        for other in found[1:]
        if _disagree(winner, other)
    )
    model_key, memory_key = label_keys(spec)
    desired = {model_key: winner.model, memory_key: str(winner.memory_mib)}
    lines.append(
        f"{winner.source} wins: {model_key}={winner.model}, {memory_key}={winner.memory_mib}"
    )
    return LabelDecision(desired, winner, tuple(lines), disagreements)


# ---- the change ---------------------------------------------------------------------------


def parse_owned(annotations: Mapping[str, str]) -> frozenset[str]:
    raw = annotations.get(OWNED_ANNOTATION, "")
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

    def patch(self, uid: str) -> dict[str, object]:
        """A JSON merge patch; `metadata.uid` makes it apply to this very node or fail."""
        labels: dict[str, str | None] = {**self.set, **dict.fromkeys(self.remove)}
        meta: dict[str, object] = {"uid": uid}
        if labels:
            meta["labels"] = labels
        if self.owned_changed:
            meta["annotations"] = {OWNED_ANNOTATION: ",".join(self.owned) or None}
        return {"metadata": meta}


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
