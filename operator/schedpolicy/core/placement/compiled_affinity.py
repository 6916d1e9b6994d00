"""The node affinity part of a compiled placement policy: the GPU requirement, the
preferred terms, and the patch that adds them as hints._gpu_affinity and hints._preferences
do. Pure."""

from __future__ import annotations

from typing import Any

from schedpolicy.core.placement import gpu_offers, hints
from schedpolicy.core.placement.api import Placement
from schedpolicy.core.placement.cel import (
    _NODE_AFFINITY,
    _PREFERRED,
    _REQUIRED,
    _at,
    _patch,
    _pref_matches,
    _Program,
    cel_string,
    cel_strings,
    cel_value,
)
from schedpolicy.core.wellknown import (
    GFD_PRODUCT,
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
)

MAX_INSTANCE_TYPE_VALUES = 512


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
