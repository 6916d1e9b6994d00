"""Placement hints added to a pod at admission. Pure.

The hints are native Kubernetes scheduling fields, so the (upstream) scheduler
does the placing: `spec.schedulerName`, required and preferred node affinity,
and a zone topology spread constraint. The result is the new value of each
top-level field that changes, plus an explanation, and the
`schedpolicy.io/hints` annotation that records what was injected by which
policy. Applying the hints to an already hinted pod changes nothing.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from schedpolicy.core.gpu.label_rules import label_keys
from schedpolicy.core.placement import gpu_offers, node_terms
from schedpolicy.core.placement.api import Placement
from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.policy.model import DEFAULT_LABEL_PREFIX
from schedpolicy.core.resources import effective_requests
from schedpolicy.core.wellknown import (
    EKS_CAPACITY_LABEL,
    GFD_PRODUCT,
    GPU_RESOURCE,
    HINTS_ANNOTATION,
    INSTANCE_TYPE_LABEL,
    KARPENTER_CAPACITY_LABEL,
    KUBE_DEFAULT_SCHEDULER,
    ZONE_LABEL,
)

TEMPLATE_HASH = "pod-template-hash"
# Labels a controller gives each pod (or each revision) rather than the whole set: left in
# a spread selector they would match one pod, or one revision, and spread nothing.
PER_POD_LABELS = frozenset(
    {
        TEMPLATE_HASH,
        "controller-revision-hash",
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
        "batch.kubernetes.io/job-completion-index",
    }
)
CAPACITY_LABELS = {
    "spot": ((KARPENTER_CAPACITY_LABEL, "spot"), (EKS_CAPACITY_LABEL, "SPOT")),
    "on-demand": ((KARPENTER_CAPACITY_LABEL, "on-demand"), (EKS_CAPACITY_LABEL, "ON_DEMAND")),
}


@dataclass(frozen=True)
class HintDecision:
    changes: Mapping[str, Any]  # "spec.schedulerName", "spec.affinity", ... -> new value
    injected: tuple[str, ...]
    explanation: tuple[str, ...]
    record: Mapping[str, Any] = field(default_factory=dict)

    def json_patch(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        """JSON Patch ops for the changes; maps that are absent are added whole."""
        ops: list[dict[str, Any]] = []
        for dotted, value in self.changes.items():
            section, name = dotted.split(".", 1)
            parent = pod.get(section) or {}
            if name.startswith("annotations."):
                key = name.split(".", 1)[1]
                if "annotations" not in parent:
                    ops.append(
                        {"op": "add", "path": f"/{section}/annotations", "value": {key: value}}
                    )
                    continue
                escaped = key.replace("~", "~0").replace("/", "~1")
                ops.append(
                    {"op": "add", "path": f"/{section}/annotations/{escaped}", "value": value}
                )
            else:
                ops.append({"op": "add", "path": f"/{section}/{name}", "value": value})
        return ops


def gpu_label_keys(policy: Policy, label_prefix: str | None = None) -> tuple[str, str]:
    """The GPU model and memory label keys a policy's hints name: `label_prefix`, else the
    policy's own nodeLabels prefix, else the default."""
    prefix = label_prefix or (
        policy.spec.node_labels.gpu.label_prefix
        if policy.spec.node_labels
        else DEFAULT_LABEL_PREFIX
    )
    return label_keys(prefix)


def gpu_request(pod_spec: Mapping[str, Any]) -> int:
    """GPUs the pod needs: effective requests, a limit alone counting as a request."""
    return int(effective_requests(pod_spec).get(GPU_RESOURCE, 0))


def _required_terms(affinity: Mapping[str, Any]) -> list[dict[str, Any]]:
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return list((required or {}).get("nodeSelectorTerms") or [])


def _constrained_keys(terms: Iterable[Mapping[str, Any]]) -> set[str]:
    return {e.get("key", "") for t in terms for e in t.get("matchExpressions") or []}


def _add_preferences(affinity: dict[str, Any], prefs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    node_affinity = affinity.setdefault("nodeAffinity", {})
    existing = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    added = [p for p in prefs if p not in existing]
    existing.extend(added)
    if not existing:
        del node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    if not node_affinity:
        del affinity["nodeAffinity"]
    return added


def preferred_term(weight: int, *exprs: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "preference": {"matchExpressions": list(exprs)}}


@dataclass
class _Draft:
    """A decision being made: the changes so far, what they inject, and why."""

    changes: dict[str, Any] = field(default_factory=dict)
    injected: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)

    def add(self, what: str, reason: str) -> None:
        self.injected.append(what)
        self.why.append(reason)


def decide(
    policy: Policy,
    pod: Mapping[str, Any],
    *,
    owner_kind: str | None = None,
    instance_types: Iterable[str] = (),
    label_prefix: str | None = None,
) -> HintDecision:
    """What to inject into `pod` (as submitted to CREATE) under `policy`'s placement.

    `instance_types` are the instance types of the cluster's nodes: an affinity cannot
    match a label prefix, so a preferred prefix becomes the list of matching types.
    """
    placement: Placement | None = policy.spec.placement
    if placement is None:
        return HintDecision({}, (), (f"{policy.name} has no placement",))
    model_key, memory_key = gpu_label_keys(policy, label_prefix)
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if owner_kind == "DaemonSet":
        # One per node by design: its controller pins each pod to its node, and a spread
        # or another scheduler could only leave a daemon Pending.
        return HintDecision({}, (), ("DaemonSet pods are placed by their controller; left as is",))
    current = spec.get("schedulerName") or ""
    if current not in ("", KUBE_DEFAULT_SCHEDULER, placement.scheduler_name):
        # Someone chose another scheduler on purpose; its placement is its own business.
        return HintDecision(
            {}, (), (f"schedulerName {current} was chosen explicitly; the pod is left as it is",)
        )
    draft = _Draft()
    if current != placement.scheduler_name:
        draft.changes["spec.schedulerName"] = placement.scheduler_name
        draft.add(
            "schedulerName", f"schedulerName: {placement.scheduler_name} (was {current or 'unset'})"
        )
    affinity = copy.deepcopy(dict(spec.get("affinity") or {}))
    gpus = gpu_request(spec)
    _gpu_affinity(
        draft, placement, affinity, gpus, (model_key, memory_key), spec.get("nodeSelector")
    )
    prefs = _preferences(draft, placement, sorted(set(instance_types)), gpus, model_key)
    added = _add_preferences(affinity, prefs)
    if added:
        draft.add("preferredAffinity", f"preferred affinity: {len(added)} term(s)")
    if affinity != (spec.get("affinity") or {}):
        draft.changes["spec.affinity"] = affinity
    _zone_spread(draft, placement, meta, spec, owner_kind)

    record = {"policy": policy.name, "generation": policy.generation, "injected": draft.injected}
    previous = (meta.get("annotations") or {}).get(HINTS_ANNOTATION)
    if draft.injected and previous != json.dumps(record, sort_keys=True):
        draft.changes["metadata.annotations." + HINTS_ANNOTATION] = json.dumps(
            record, sort_keys=True
        )
    return HintDecision(draft.changes, tuple(draft.injected), tuple(draft.why), record)


def gpu_alternatives(
    placement: Placement, model_key: str, memory_key: str
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The terms a GPU placement ORs, by name: the label term, then, if the verified table
    has instance types for it, the term a node autoscaler can launch (see gpu_offers)."""
    assert placement.gpu is not None
    wanted = [
        {"key": model_key, "operator": "In", "values": list(placement.gpu.models)},
        {"key": memory_key, "operator": "Gt", "values": [str(placement.gpu.min_memory_mib - 1)]},
    ]
    types = gpu_offers.instance_types_for(placement.gpu.models, placement.gpu.min_memory_mib)
    launch = [("the launch term", gpu_offers.launch_term(types, model_key))] if types else []
    # Alive by themselves within the API's bounds; the compiled policy relies on it.
    return [
        (name, alt)
        for name, alt in [("the GPU label term", wanted), *launch]
        if node_terms.dead({"matchExpressions": alt}) is None
    ]


def _gpu_affinity(
    draft: _Draft,
    placement: Placement,
    affinity: dict[str, Any],
    gpus: int,
    keys: tuple[str, str],
    node_selector: Mapping[str, str] | None,
) -> None:
    if placement.gpu is None:
        return
    if gpus <= 0:
        draft.why.append("GPU affinity: not needed, the pod requests no nvidia.com/gpu")
        return
    model_key, memory_key = keys
    terms = _required_terms(affinity)
    taken = _constrained_keys(terms) & {model_key, memory_key}
    if taken:
        draft.why.append(
            "GPU affinity: skipped, the pod's own required terms constrain "
            + ", ".join(sorted(taken))
        )
        return
    alternatives = gpu_alternatives(placement, model_key, memory_key)
    # Requirements are ANDed into every existing term: adding a term would OR them in. The
    # launch term is the one OR added, after every label term (see gpu_offers). A product
    # that can match no node is left out (node_terms).
    merged = node_terms.and_into(terms, alternatives, node_selector)
    if not merged.terms:
        # Only the pod's own constraints can rule out every alternative: its terms match no
        # node, or its nodeSelector names a GPU model or memory the policy does not accept.
        # As when its terms name the GPU keys, the pod's own choice stands.
        draft.why.append(
            f"GPU affinity: not added: ANDed with the pod's own node affinity and"
            f" nodeSelector, no term could match any node ({'; '.join(merged.dropped)});"
            " the pod keeps its own constraints, and runs only where they allow"
        )
        return
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": list(merged.terms)
    }
    draft.add("gpuAffinity", _gpu_why(placement, keys, len(terms), merged.dropped))


def _gpu_why(
    placement: Placement, keys: tuple[str, str], own_terms: int, dropped: tuple[str, ...]
) -> str:
    assert placement.gpu is not None
    types = gpu_offers.instance_types_for(placement.gpu.models, placement.gpu.min_memory_mib)
    launch = (
        f"; or, on nodes Karpenter launched and we have not labelled yet, instance types"
        f" {', '.join(types)} (the verified table)"
        if types
        else "; no instance type in the verified table holds it, so a node autoscaler cannot"
        " launch a node for it"
    )
    left_out = (
        f"; left out {len(dropped)} term(s) that could match no node: {'; '.join(dropped)}"
        if dropped
        else ""
    )
    return (
        f"GPU affinity: {keys[0]} in {list(placement.gpu.models)} and {keys[1]} >"
        f" {placement.gpu.min_memory_mib - 1}, in each of {own_terms or 1} term(s)"
        f"{launch}{left_out}"
    )


def _preferences(
    draft: _Draft, placement: Placement, known: list[str], gpus: int, model_key: str
) -> list[dict[str, Any]]:
    prefs: list[dict[str, Any]] = []
    if placement.capacity_type is not None:
        weight = placement.capacity_type.weight
        for key, value in CAPACITY_LABELS[placement.capacity_type.prefer]:
            prefs.append(preferred_term(weight, {"key": key, "operator": "In", "values": [value]}))
    for pref in placement.instance_types or []:
        matching = [t for t in known if t.startswith(pref.prefix + ".") or t == pref.prefix]
        if matching:
            expr = {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": matching}
            prefs.append(preferred_term(pref.weight, expr))
        else:
            draft.why.append(
                f"instance type {pref.prefix}*: no node of that type exists yet;"
                " no preference added"
            )
    if placement.avoid_gpu_nodes and gpus == 0:
        prefs.append(
            preferred_term(
                100,
                {"key": model_key, "operator": "DoesNotExist"},
                {"key": GFD_PRODUCT, "operator": "DoesNotExist"},
            )
        )
    return prefs


def _zone_spread(
    draft: _Draft,
    placement: Placement,
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    owner_kind: str | None,
) -> None:
    if placement.zone_spread is None:
        return
    constraints = list(spec.get("topologySpreadConstraints") or [])
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in PER_POD_LABELS}
    if any(c.get("topologyKey") == ZONE_LABEL for c in constraints):
        draft.why.append(
            "zone spread: the pod already has a constraint on topology.kubernetes.io/zone"
        )
        return
    if owner_kind is None or not labels:
        draft.why.append(
            "zone spread: skipped, the pod has no owner whose pods it could spread with"
        )
        return
    constraints.append(
        {
            "maxSkew": placement.zone_spread.max_skew,
            "topologyKey": ZONE_LABEL,
            "whenUnsatisfiable": placement.zone_spread.when_unsatisfiable,
            "labelSelector": {"matchLabels": labels},
        }
    )
    draft.changes["spec.topologySpreadConstraints"] = constraints
    draft.add(
        "zoneSpread", f"zone spread: maxSkew {placement.zone_spread.max_skew} over {sorted(labels)}"
    )
