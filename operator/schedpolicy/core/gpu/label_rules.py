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
from typing import Literal

from schedpolicy.core.gpu import dra
from schedpolicy.core.gpu.api import GPULabels
from schedpolicy.core.gpu.sources import (
    GPUFacts,
    Refusal,
    disagree,
    dra_full_gpus,
    dra_gpus,
    from_feature_discovery,
    from_instance_type,
    from_inventory,
    from_resource_slices,
    read_sharing,
)
from schedpolicy.core.policy.model import DNS_SUBDOMAIN, is_reserved_label_domain
from schedpolicy.core.wellknown import (
    FIELD_MANAGER,
    OWNED_LABELS_ANNOTATION,
)

MODEL_KEY = "gpu-model"
MEMORY_KEY = "gpu-memory-mib"
# Why a node gets no label, as `schedpolicy_gpu_nodes_unlabelled{reason}` counts it:
# the policy or a source refused; no GPU at all (neither allocatable nor a DRA GPU device);
# GPUs that no source of the policy can name.
Unlabelled = Literal["refused", "no-allocatable-gpus", "unknown-gpu"]


# ---- the decision ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelDecision:
    labels: Mapping[str, str]  # desired labels; empty for a node that gets none
    facts: GPUFacts | None
    explanation: tuple[str, ...]
    disagreements: tuple[str, ...] = ()
    error: str | None = None  # the policy itself cannot label (a reserved prefix)
    refusals: tuple[Refusal, ...] = ()  # why a node with GPU input gets no label
    unlabelled: Unlabelled | None = None  # set exactly when `labels` is empty


def label_keys(prefix: str) -> tuple[str, str]:
    """The model and memory label keys under a prefix: the one place they are spelled."""
    return (f"{prefix}/{MODEL_KEY}", f"{prefix}/{MEMORY_KEY}")


def _refused(lines: list[str], refusals: tuple[Refusal, ...]) -> LabelDecision:
    why = "; ".join(f"{r.source} refused ({r.reason})" for r in refusals)
    return LabelDecision(
        {}, None, (*lines, f"no label: {why}"), refusals=refusals, unlabelled="refused"
    )


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
        return LabelDecision({}, None, (error,), error=error, unlabelled="refused")
    dra_count = dra_full_gpus(devices)
    if allocatable_gpus <= 0 and not dra_gpus(devices):
        why = "status.allocatable has no nvidia.com/gpu and no ResourceSlice publishes GPUs"
        return LabelDecision(
            {}, None, (f"{why}: not a GPU node",), unlabelled="no-allocatable-gpus"
        )
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
        return LabelDecision(
            {}, None, (*lines, "no source knows this node's GPUs"), unlabelled="unknown-gpu"
        )
    winner = found[0]
    disagreements = tuple(
        f"{other.source} says {other.model}/{other.memory_mib} MiB, {winner.source} says"
        f" {winner.model}/{winner.memory_mib} MiB; {winner.source} comes first"
        for other in found[1:]
        if disagree(winner, other)
    )
    mib = sharing.per_client(winner.memory_mib)
    if sharing.strategy != "none":
        lines.append(sharing.describe(winner.memory_mib))
    model_key, memory_key = label_keys(spec.label_prefix)
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
