"""A SchedulingPolicy's placement compiled to a MutatingAdmissionPolicy. Pure.

The compiled policy makes, inside the apiserver, the same change `hints.decide` makes in
the webhook: the stored pod is the same on both paths (tests/e2e/test_admission_policy.py
checks this differentially). The CEL follows hints.py rule for rule; where hints.py
computes a value, the CEL computes the same value from the pod being created:

- which policy governs: the binding's selectors are the policy's own, and the CEL leaves
  alone a pod that a policy earlier in `matching.precedence` also selects;
- schedulerName, only over empty or default-scheduler;
- GPU requirements ANDed into every required term, unless the pod constrains those keys;
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

from schedpolicy.core import gpu_offers, hints
from schedpolicy.core.api import (
    API_VERSION,
    KIND,
    LabelSelector,
    Placement,
)
from schedpolicy.core.matching import Policy, may_overlap, precedence
from schedpolicy.core.wellknown import (
    GFD_PRODUCT,
    GPU_RESOURCE,
    HINTS_ANNOTATION,
    IGNORE_LABEL,
    INSTANCE_TYPE_LABEL,
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
MAX_INSTANCE_TYPE_VALUES = 512
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


# ---- CEL literals ------------------------------------------------------------------------


def cel_string(value: str) -> str:
    escaped = (
        value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    )
    return f"'{escaped}'"


def cel_value(value: Any) -> str:
    """A JSON value as a CEL literal. The apiserver's CEL wants homogeneous aggregates, so
    every element and map value is wrapped in dyn()."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return cel_string(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{cel_string(k)}: dyn({cel_value(v)})" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(f"dyn({cel_value(v)})" for v in value) + "]"
    raise TypeError(f"no CEL literal for {type(value).__name__}")


def cel_strings(values: Iterable[str]) -> str:
    return "[" + ", ".join(cel_string(v) for v in values) + "]"


def selector_cel(selector: LabelSelector | None, labels: str) -> str:
    """A label selector as CEL over the map expression `labels`, with Kubernetes semantics."""
    if selector is None:
        return "true"
    parts: list[str] = []
    for key, value in sorted((selector.match_labels or {}).items()):
        parts.append(f"{labels}[?{cel_string(key)}] == optional.of({cel_string(value)})")
    for req in selector.match_expressions or []:
        key, values = cel_string(req.key), cel_strings(req.values or [])
        if req.operator == "Exists":
            parts.append(f"{key} in {labels}")
        elif req.operator == "DoesNotExist":
            parts.append(f"!({key} in {labels})")
        elif req.operator == "In":
            parts.append(f"({key} in {labels} && {labels}[{key}] in {values})")
        else:
            parts.append(f"(!({key} in {labels}) || !({labels}[{key}] in {values}))")
    return " && ".join(parts) if parts else "true"


def k8s_selector(selector: LabelSelector | None, *extra: Mapping[str, Any]) -> dict[str, Any]:
    """The policy's selector in the API's shape, with `extra` requirements ANDed in."""
    out: dict[str, Any] = {}
    if selector is not None and selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    exprs = [
        {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
        for r in (selector.match_expressions or [] if selector is not None else [])
    ]
    exprs.extend(dict(e) for e in extra)
    if exprs:
        out["matchExpressions"] = exprs
    return out


# ---- the compiler ------------------------------------------------------------------------

_AFFINITY = "object.spec.?affinity"
_NODE_AFFINITY = f"{_AFFINITY}.?nodeAffinity"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _patch(op: str, path: str, value: str | None = None) -> str:
    """A JSONPatch literal; `path` is CEL (a quoted literal, or an expression)."""
    value_part = f", value: {value}" if value is not None else ""
    return f"JSONPatch{{op: '{op}', path: {path}{value_part}}}"


def _at(path: str) -> str:
    return cel_string(path)


def _pref_matches(pref: Mapping[str, Any]) -> str:
    """CEL: the existing preferred term `p` equals `pref` as JSON dicts compare."""
    exprs = pref["preference"]["matchExpressions"]
    parts = [
        f"p.weight == {pref['weight']}",
        "!has(p.preference.matchFields)",
        f"size(p.preference.?matchExpressions.orValue([])) == {len(exprs)}",
    ]
    for i, expr in enumerate(exprs):
        term = f"p.preference.matchExpressions[{i}]"
        parts.append(f"{term}.key == {cel_string(expr['key'])}")
        parts.append(f"{term}.operator == {cel_string(expr['operator'])}")
        parts.append(f"{term}.?values.orValue([]) == {cel_strings(expr.get('values', []))}")
    return " && ".join(parts)


@dataclass
class _Program:
    variables: list[tuple[str, str]]
    injected: list[tuple[str, str]]  # (name in the record, CEL condition)
    patches: list[str]
    why: list[str]

    def var(self, name: str, expression: str) -> None:
        self.variables.append((name, expression))


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
    prog = _Program([], [], [], [])
    prog.var("labels", "has(object.metadata.labels) ? object.metadata.labels : {}")
    prog.var(
        "nsLabels",
        "has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}",
    )
    _governed(prog, placement, earlier)
    model_key, memory_key = hints.gpu_label_keys(policy, label_prefix)
    if placement.gpu is not None or placement.avoid_gpu_nodes:
        prog.var("gpus", _gpus_cel())
    scheduler = cel_string(placement.scheduler_name)
    prog.var("setScheduler", f"object.spec.?schedulerName.orValue('') != {scheduler}")
    prog.injected.append(("schedulerName", "variables.setScheduler"))
    prog.patches.append(
        f"(variables.setScheduler ? [{_patch('add', _at('/spec/schedulerName'), scheduler)}] : [])"
    )
    refused = _affinity(prog, placement, sorted(set(instance_types)), model_key, memory_key)
    if refused is not None:
        return Inexpressible(policy.name, refused[0], refused[1])
    _zone_spread(prog, placement)
    _record(prog, policy)
    return _assemble(policy, prog, excluded_namespaces)


def _governed(prog: _Program, placement: Placement, earlier: list[Policy]) -> None:
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


def _gpus_cel() -> str:
    """CEL: the pod requests nvidia.com/gpu (hints.gpu_request > 0). The apiserver has
    already copied limits into empty requests, and extended resources are whole numbers,
    so any positive request in a container, an init container or the overhead counts.
    A quantity is parsed only where the key is present: most pods have no GPUs, and
    parsing was the dearest part of this check."""
    key = cel_string(GPU_RESOURCE)
    return (
        "(object.spec.containers + object.spec.?initContainers.orValue([])).exists(c,"
        f" c.?resources.?requests[?{key}].hasValue()"
        f" && quantity(c.resources.requests[{key}]).isGreaterThan(quantity('0')))"
        f" || (object.spec.?overhead[?{key}].hasValue()"
        f" && quantity(object.spec.overhead[{key}]).isGreaterThan(quantity('0')))"
    )


def _gpu_requirement(prog: _Program, placement: Placement, model_key: str, memory_key: str) -> str:
    """Variables for the GPU requirement; CEL saying whether it applies to the pod."""
    if placement.gpu is not None:
        wanted = [
            {"key": model_key, "operator": "In", "values": list(placement.gpu.models)},
            {
                "key": memory_key,
                "operator": "Gt",
                "values": [str(placement.gpu.min_memory_mib - 1)],
            },
        ]
        prog.var("terms", f"{_NODE_AFFINITY}.?{_REQUIRED}.?nodeSelectorTerms.orValue([])")
        prog.var(
            "gpuApply",
            "variables.gpus && !variables.terms.exists(t, t.?matchExpressions.orValue([])"
            f".exists(e, e.key in {cel_strings([model_key, memory_key])}))",
        )
        prog.var("wanted", cel_value(wanted))
        types = gpu_offers.instance_types_for(placement.gpu.models, placement.gpu.min_memory_mib)
        if types:
            prog.var("launch", cel_value(gpu_offers.launch_term(types, model_key)))
        gpu_apply = "variables.gpuApply"
        prog.injected.append(("gpuAffinity", gpu_apply))
        prog.why.append(
            f"GPU affinity: {model_key} in {list(placement.gpu.models)} and {memory_key} >"
            f" {placement.gpu.min_memory_mib - 1}, ANDed into each required term"
            + (f"; then each term again with instance types {', '.join(types)}" if types else "")
        )
        return gpu_apply
    return "false"


Candidates = list[tuple[dict[str, Any], str]]  # (preferred term, CEL condition)


def _candidates(
    prog: _Program, placement: Placement, known: list[str], model_key: str
) -> Candidates | tuple[str, str]:
    """The preferred terms hints.decide may add, or (feature, why) past the bounds."""
    candidates: Candidates = []
    if placement.capacity_type is not None:
        weight = placement.capacity_type.weight
        for key, value in hints.CAPACITY_LABELS[placement.capacity_type.prefer]:
            expr = {"key": key, "operator": "In", "values": [value]}
            candidates.append((hints.preferred_term(weight, expr), "true"))
    values = 0
    for pref in placement.instance_types or []:
        matching = [t for t in known if t.startswith(pref.prefix + ".") or t == pref.prefix]
        values += len(matching)
        if matching:
            expr = {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": matching}
            candidates.append((hints.preferred_term(pref.weight, expr), "true"))
            prog.why.append(f"instance type {pref.prefix}*: {len(matching)} known type(s)")
        else:
            prog.why.append(f"instance type {pref.prefix}*: no node of that type yet")
    if values > MAX_INSTANCE_TYPE_VALUES:
        return (
            "instanceTypes",
            f"the prefixes match {values} instance types (the compiler takes at most"
            f" {MAX_INSTANCE_TYPE_VALUES})",
        )
    if placement.avoid_gpu_nodes:
        avoid = hints.preferred_term(
            100,
            {"key": model_key, "operator": "DoesNotExist"},
            {"key": GFD_PRODUCT, "operator": "DoesNotExist"},
        )
        candidates.append((avoid, "!variables.gpus"))
    return candidates


def _affinity(
    prog: _Program,
    placement: Placement,
    known: list[str],
    model_key: str,
    memory_key: str,
) -> tuple[str, str] | None:
    gpu_apply = _gpu_requirement(prog, placement, model_key, memory_key)
    candidates = _candidates(prog, placement, known, model_key)
    if isinstance(candidates, tuple):
        return candidates
    if candidates:
        prog.var("existingPrefs", f"{_NODE_AFFINITY}.?{_PREFERRED}.orValue([])")
        added = " + ".join(
            f"(({cond}) && !variables.existingPrefs.exists(p, {_pref_matches(pref)})"
            f" ? [{cel_value(pref)}] : [])"
            for pref, cond in candidates
        )
        prog.var("addedPrefs", added)
        prog.injected.append(("preferredAffinity", "size(variables.addedPrefs) > 0"))
    added_any = "size(variables.addedPrefs) > 0" if candidates else "false"
    prog.var("affinityChange", f"{gpu_apply} || {added_any}")
    path = "/spec/affinity/nodeAffinity"
    ops = [
        f"(has(object.spec.affinity) ? [] : [{_patch('add', _at('/spec/affinity'), '{}')}])",
        f"({_NODE_AFFINITY}.hasValue() ? [] : [{_patch('add', _at(path), '{}')}])",
    ]
    if placement.gpu is not None:
        alternatives = ["wanted"]
        if gpu_offers.instance_types_for(placement.gpu.models, placement.gpu.min_memory_mib):
            alternatives.append("launch")
        terms = " + ".join(f"({_terms_with(alt)})" for alt in alternatives)
        value = f"dyn({{'nodeSelectorTerms': dyn({terms})}})"
        ops.append(
            f"(variables.gpuApply ? [{_patch('add', _at(f'{path}/{_REQUIRED}'), value)}] : [])"
        )
    if candidates:
        preferred = path + "/" + _PREFERRED
        ops.append(
            "(size(variables.addedPrefs) == 0 ? []"
            f" : {_NODE_AFFINITY}.?{_PREFERRED}.hasValue()"
            f" ? variables.addedPrefs.map(x, {_patch('add', _at(preferred + '/-'), 'x')})"
            f" : [{_patch('add', _at(preferred), 'variables.addedPrefs')}])"
        )
    # hints.decide drops an empty nodeAffinity when it adds nothing to it.
    empty = (
        f"{_NODE_AFFINITY}.hasValue() && !{_NODE_AFFINITY}.?{_REQUIRED}.hasValue()"
        f" && !{_NODE_AFFINITY}.?{_PREFERRED}.hasValue()"
    )
    prog.patches.append(
        f"(variables.affinityChange ? {' + '.join(ops)}"
        f" : ({empty}) ? [{_patch('remove', _at(path))}] : [])"
    )
    return None


def _terms_with(alternative: str) -> str:
    """CEL: every required term of the pod (or one empty term) with the expressions of
    `variables.<alternative>` ANDed in, as hints._gpu_affinity builds them."""
    exprs = f"variables.{alternative}"
    term = f"dyn(t.?matchExpressions.orValue([]).map(e, dyn(e)) + {exprs})"
    return (
        f"size(variables.terms) == 0 ? [dyn({{'matchExpressions': dyn({exprs})}})]"
        " : variables.terms.map(t, t.?matchFields.hasValue()"
        f" ? dyn({{'matchExpressions': {term}, 'matchFields': dyn(t.matchFields)}})"
        f" : dyn({{'matchExpressions': {term}}}))"
    )


def _zone_spread(prog: _Program, placement: Placement) -> None:
    spread = placement.zone_spread
    if spread is None:
        return
    prog.var(
        "spreadKeys",
        f"variables.labels.filter(k, !(k in {cel_strings(sorted(hints.PER_POD_LABELS))}))",
    )
    prog.var(
        "spread",
        f"!object.spec.?topologySpreadConstraints.orValue([]).exists(c, c.topologyKey =="
        f" {cel_string(ZONE_LABEL)})"
        " && object.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false))"
        " && size(variables.spreadKeys) > 0",
    )
    constraint = {
        "maxSkew": spread.max_skew,
        "topologyKey": ZONE_LABEL,
        "whenUnsatisfiable": spread.when_unsatisfiable,
        "labelSelector": {"matchLabels": {}},
    }
    index = "string(size(object.spec.?topologySpreadConstraints.orValue([])))"
    key_path = (
        f"'/spec/topologySpreadConstraints/' + {index} + '/labelSelector/matchLabels/'"
        " + jsonpatch.escapeKey(k)"
    )
    prog.patches.append(
        "(variables.spread ? (has(object.spec.topologySpreadConstraints) ? []"
        f" : [{_patch('add', _at('/spec/topologySpreadConstraints'), '[]')}])"
        f" + [{_patch('add', _at('/spec/topologySpreadConstraints/-'), cel_value(constraint))}]"
        f" + variables.spreadKeys.map(k, {_patch('add', key_path, 'variables.labels[k]')})"
        " : [])"
    )
    prog.injected.append(("zoneSpread", "variables.spread"))
    prog.why.append(f"zone spread: maxSkew {spread.max_skew}")


def _record(prog: _Program, policy: Policy) -> None:
    injected = " + ".join(f"({cond} ? ['{name}'] : [])" for name, cond in prog.injected)
    prog.var("injected", injected)
    # json.dumps(record, sort_keys=True): keys in order, ", " and ": " between.
    head = json.dumps({"generation": policy.generation})[:-1] + ', "injected": ['
    tail = '], "policy": ' + json.dumps(policy.name) + "}"
    prog.var(
        "record",
        f"{cel_string(head)} + variables.injected.map(s, '\"' + s + '\"').join(', ')"
        f" + {cel_string(tail)}",
    )
    key = HINTS_ANNOTATION.replace("~", "~0").replace("/", "~1")
    whole = "{" + cel_string(HINTS_ANNOTATION) + ": variables.record}"
    prog.patches.append(
        "(size(variables.injected) == 0 ? [] : has(object.metadata.annotations)"
        f" ? [{_patch('add', _at('/metadata/annotations/' + key), 'variables.record')}]"
        f" : [{_patch('add', _at('/metadata/annotations'), whole)}])"
    )


def _assemble(
    policy: Policy, prog: _Program, excluded_namespaces: Collection[str]
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
    policy: Policy, prog: _Program, expression: str, excluded_namespaces: Collection[str]
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
