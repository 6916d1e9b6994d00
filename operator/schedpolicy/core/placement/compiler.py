"""A SchedulingPolicy's placement compiled to a MutatingAdmissionPolicy. Pure.

The compiled policy makes, inside the apiserver, the same change `hints.decide` makes in
the webhook: the stored pod is the same on both paths (tests/e2e/test_admission_policy.py
checks this differentially). The CEL follows hints.py rule for rule; where hints.py
computes a value, the CEL computes the same value from the pod being created:

- which policy governs: the binding's selectors are the policy's own, and the CEL leaves
  alone a pod that a policy earlier in `matching.precedence` also selects;
- schedulerName, only over empty or default-scheduler;
- GPU requirements ANDed into every required term, unless the pod constrains those keys,
  with In lists on one key intersected and terms that can match no node left out
  (node_terms.py, and compiled_terms.py its CEL);
- preferred terms not already on the pod (compared field by field, as dicts are compared);
- zone spread over the labels the owner's pods share;
- the `schedpolicy.io/hints` record, byte for byte as `json.dumps(..., sort_keys=True)`.

Instance-type preferences are compiled with the instance types known now (an affinity
cannot match a prefix), so a compiled policy depends on the inventory; `inventory_keys`
says which part, so the caller recompiles when it changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schedpolicy.core.api import API_VERSION, KIND
from schedpolicy.core.placement import hints
from schedpolicy.core.placement.api import Placement
from schedpolicy.core.placement.cel import (
    SPREAD_TYPE,
    Program,
    cel_path,
    cel_string,
    cel_strings,
    k8s_selector,
    patch_op,
    selector_cel,
)
from schedpolicy.core.placement.compiled_affinity import (
    affinity_patches,
    gpus_requested_cel,
)
from schedpolicy.core.policy.matching import Policy, may_overlap, precedence
from schedpolicy.core.wellknown import (
    HINTS_ANNOTATION,
    IGNORE_LABEL,
    KUBE_DEFAULT_SCHEDULER,
    PRODUCT_COMPONENTS,
    PRODUCT_NAME,
    ZONE_LABEL,
)

GROUP_VERSION = "admissionregistration.k8s.io/v1"
NAME_PREFIX = "schedpolicy-hints-"
# Our objects, by label; and the digest of the spec each was compiled to.
MANAGED_BY = ("app.kubernetes.io/managed-by", "schedpolicy")
DIGEST_ANNOTATION = "schedpolicy.io/compiled-digest"
# The compiler's own bounds, far below the apiserver's: past them the CEL grows with
# the product of the parts, and the webhook's plain Python is the better place for it.
MAX_EARLIER_POLICIES = 64
MAX_EXPRESSION_CHARS = 256 * 1024


@dataclass(frozen=True)
class Compiled:
    """The MutatingAdmissionPolicy and its binding that serve one SchedulingPolicy."""

    policy: str
    name: str
    body: Mapping[str, Any]
    binding: Mapping[str, Any]
    digest: str
    explanation: tuple[str, ...]


@dataclass(frozen=True)
class Inexpressible:
    """Why a policy stays on the webhook: the feature, and what about it."""

    policy: str
    feature: str
    why: str

    @property
    def message(self) -> str:
        return f"{self.feature}: {self.why}; the webhook serves this policy"


def object_name(policy: str) -> str:
    """The MutatingAdmissionPolicy's (and binding's) name: a DNS subdomain of at most 253."""
    name = NAME_PREFIX + policy
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(policy.encode()).hexdigest()[:10]
    return f"{name[:242]}-{digest}"


def compile_policy(
    policy: Policy,
    policies: Iterable[Policy],
    *,
    instance_types: Collection[str],
    excluded_namespaces: Collection[str],
    label_prefix: str | None = None,
) -> Compiled | Inexpressible:
    """The MutatingAdmissionPolicy that hints pods as `hints_for(pod, ...)` does for
    `policy`, given every policy (for precedence) and the cluster's instance types."""
    placement = policy.spec.placement
    if placement is None:
        return Inexpressible(policy.name, "placement", "the policy has no placement")
    earlier = sorted(
        (
            q
            for q in policies
            if q.name != policy.name
            and precedence(q) < precedence(policy)
            and may_overlap(q, policy, "placement")
        ),
        key=precedence,
    )
    if len(earlier) > MAX_EARLIER_POLICIES:
        return Inexpressible(
            policy.name,
            "priority",
            f"{len(earlier)} policies of higher precedence may select the same pods"
            f" (the compiler takes at most {MAX_EARLIER_POLICIES})",
        )
    prog = Program([], [], [], [])
    prog.var("labels", "has(object.metadata.labels) ? object.metadata.labels : {}")
    prog.var(
        "nsLabels",
        "has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}",
    )
    _governed(prog, placement, earlier)
    model_key, memory_key = hints.gpu_label_keys(policy, label_prefix)
    if placement.gpu is not None or placement.avoid_gpu_nodes:
        prog.var("gpus", gpus_requested_cel())
    scheduler = cel_string(placement.scheduler_name)
    prog.var("setScheduler", f"object.spec.?schedulerName.orValue('') != {scheduler}")
    prog.injected.append(("schedulerName", "variables.setScheduler"))
    prog.patches.append(
        "(variables.setScheduler ?"
        f" [{patch_op('add', cel_path('/spec/schedulerName'), scheduler)}] : [])"
    )
    refused = affinity_patches(prog, placement, sorted(set(instance_types)), model_key, memory_key)
    if refused is not None:
        return Inexpressible(policy.name, refused[0], refused[1])
    _zone_spread(prog, placement)
    _record(prog, policy)
    return _assemble(policy, prog, excluded_namespaces)


def _governed(prog: Program, placement: Placement, earlier: list[Policy]) -> None:
    parts = [
        # The chart's own pods, by their labels (admission.is_own_pod).
        f"!(variables.labels[?{cel_string(PRODUCT_NAME[0])}] =="
        f" optional.of({cel_string(PRODUCT_NAME[1])})"
        " && variables.labels[?'app.kubernetes.io/component'].orValue('') in"
        f" {cel_strings(sorted(PRODUCT_COMPONENTS))})",
        # An explicitly chosen other scheduler is left alone, and so are daemons.
        f"object.spec.?schedulerName.orValue('') in"
        f" {cel_strings(['', KUBE_DEFAULT_SCHEDULER, placement.scheduler_name])}",
        "!object.metadata.?ownerReferences.orValue([]).exists(r,"
        " r.?controller.orValue(false) && r.kind == 'DaemonSet')",
    ]
    for q in earlier:
        parts.append(
            f"!(({selector_cel(q.spec.namespace_selector, 'variables.nsLabels')})"
            f" && ({selector_cel(q.spec.pod_selector, 'variables.labels')}))"
        )
    prog.var("governed", " && ".join(parts))
    if earlier:
        prog.why.append(
            "leaves alone pods that " + ", ".join(q.name for q in earlier) + " also select"
        )


def _zone_spread(prog: Program, placement: Placement) -> None:
    spread = placement.zone_spread
    if spread is None:
        return
    prog.var(
        "spreadLabels",
        f"variables.labels.transformMap(k, v, !(k in {cel_strings(sorted(hints.PER_POD_LABELS))}),"
        " v)",
    )
    prog.var(
        "spread",
        f"!object.spec.?topologySpreadConstraints.orValue([]).exists(c, c.topologyKey =="
        f" {cel_string(ZONE_LABEL)})"
        " && object.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false))"
        " && size(variables.spreadLabels) > 0",
    )
    constraint = (
        f"{SPREAD_TYPE}{{maxSkew: {spread.max_skew}, topologyKey: {cel_string(ZONE_LABEL)},"
        f" whenUnsatisfiable: {cel_string(spread.when_unsatisfiable)},"
        f" labelSelector: {SPREAD_TYPE}.labelSelector{{matchLabels: variables.spreadLabels}}}}"
    )
    value = f"object.spec.?topologySpreadConstraints.orValue([]) + [{constraint}]"
    add = patch_op("add", cel_path("/spec/topologySpreadConstraints"), value)
    prog.patches.append(f"(variables.spread ? [{add}] : [])")
    prog.injected.append(("zoneSpread", "variables.spread"))
    prog.why.append(f"zone spread: maxSkew {spread.max_skew}")


def _record(prog: Program, policy: Policy) -> None:
    """The `schedpolicy.io/hints` record: one string literal for each set of hints that may
    be injected, chosen by their conditions, so no string is built while admitting."""

    def text(injected: list[str]) -> str:
        record = {"policy": policy.name, "generation": policy.generation, "injected": injected}
        return cel_string(json.dumps(record, sort_keys=True)) if injected else "''"

    def choose(done: list[str], rest: list[tuple[str, str]]) -> str:
        if not rest:
            return text(done)
        (name, cond), later = rest[0], rest[1:]
        return f"({cond} ? {choose([*done, name], later)} : {choose(done, later)})"

    prog.var("record", choose([], prog.injected))
    key = HINTS_ANNOTATION.replace("~", "~0").replace("/", "~1")
    whole = "{" + cel_string(HINTS_ANNOTATION) + ": variables.record}"
    prog.patches.append(
        "(variables.record == '' ? [] : has(object.metadata.annotations)"
        f" ? [{patch_op('add', cel_path('/metadata/annotations/' + key), 'variables.record')}]"
        f" : [{patch_op('add', cel_path('/metadata/annotations'), whole)}])"
    )


def _assemble(
    policy: Policy, prog: Program, excluded_namespaces: Collection[str]
) -> Compiled | Inexpressible:
    name = object_name(policy.name)
    expression = "!variables.governed ? [] : " + " + ".join(prog.patches)
    size = len(expression) + sum(len(e) for _, e in prog.variables)
    if size > MAX_EXPRESSION_CHARS:
        return Inexpressible(
            policy.name,
            "size",
            f"the compiled CEL would be {size} characters (at most {MAX_EXPRESSION_CHARS})",
        )
    owner = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": policy.name,
        "uid": policy.uid,
        "controller": True,
    }
    meta_labels = {
        MANAGED_BY[0]: MANAGED_BY[1],
        "schedpolicy.io/policy": policy.name,
    }
    spec = _spec(policy, prog, expression, excluded_namespaces)
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    annotations = {DIGEST_ANNOTATION: digest}
    metadata = {
        "name": name,
        "labels": meta_labels,
        "annotations": annotations,
        "ownerReferences": [owner] if policy.uid else [],
    }
    body = {
        "apiVersion": GROUP_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": metadata,
        "spec": spec,
    }
    binding = {
        "apiVersion": GROUP_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {**metadata, "annotations": annotations},
        "spec": {"policyName": name},
    }
    why = (f"compiled to MutatingAdmissionPolicy {name}", *prog.why)
    return Compiled(policy.name, name, body, binding, digest, why)


def _spec(
    policy: Policy, prog: Program, expression: str, excluded_namespaces: Collection[str]
) -> dict[str, Any]:
    excluded = sorted({"kube-system", *excluded_namespaces})
    spec = {
        "failurePolicy": "Ignore",
        # Not IfNeeded: the apiserver (1.36, 1.37) counts a policy's own patch as a change
        # that needs reinvocation, so IfNeeded ran every compiled policy twice per create
        # and the second run, adding nothing, doubled its CEL cost. Mutating admission
        # policies run ahead of every webhook, so what Never gives up is a later
        # webhook's change re-deciding the hints (README, "Admission paths").
        "reinvocationPolicy": "Never",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods"],
                }
            ],
            "matchPolicy": "Equivalent",
            "namespaceSelector": k8s_selector(
                policy.spec.namespace_selector,
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded},
            ),
            "objectSelector": k8s_selector(
                policy.spec.pod_selector, {"key": IGNORE_LABEL, "operator": "DoesNotExist"}
            ),
        },
        "variables": [{"name": n, "expression": e} for n, e in prog.variables],
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}],
    }
    return spec


def compile_all(
    policies: Iterable[Policy],
    *,
    instance_types: Collection[str],
    excluded_namespaces: Collection[str],
) -> dict[str, Compiled | Inexpressible]:
    """Every placement policy's outcome, by policy name."""
    listed = [p for p in policies if p.spec.placement is not None]
    return {
        p.name: compile_policy(
            p, listed, instance_types=instance_types, excluded_namespaces=excluded_namespaces
        )
        for p in listed
    }


def explain(outcome: Compiled | Inexpressible | None) -> Mapping[str, Any]:
    """The path a policy's hints take, for status and explain."""
    if outcome is None:
        return {"path": "Webhook", "reason": "PoliciesNotServed"}
    if isinstance(outcome, Inexpressible):
        return {"path": "Webhook", "reason": "Inexpressible", "message": outcome.message}
    return {"path": "Policy", "object": outcome.name, "digest": outcome.digest}
