"""The node affinity part of a compiled placement policy: the GPU requirement, the
preferred terms, and the one patch operation that sets the pod's affinity to what
hints._gpu_affinity and hints._preferences make of it. Pure.

Most pods come with no affinity at all. For them what is added depends only on whether the
pod requests GPUs, so it is one of two values known when compiling, written as literals:
the apiserver's CEL (cel-go's OptOptimize) builds a literal of constants once, when the
policy is loaded, so such a pod costs a `has()`, a ternary and the patch. A pod with an
affinity of its own has it rebuilt whole, of the pod schema's own types
(`Object.spec.affinity{...}`), in the same one operation; those initialisers are evaluated
on every create, which issue 49's measurements showed to cost more than the whole policy
did before (bench/admission/policy_cost.py)."""

from __future__ import annotations

from typing import Any

from schedpolicy.core.placement import compiled_terms, gpu_offers, hints
from schedpolicy.core.placement.api import Placement
from schedpolicy.core.placement.cel import (
    AFFINITY_EXPR,
    AFFINITY_TYPE,
    EXPRESSION_TYPE,
    NODE_AFFINITY_EXPR,
    NODE_AFFINITY_TYPE,
    PREFERRED_FIELD,
    PREFERRED_TYPE,
    REQUIRED_FIELD,
    REQUIRED_TYPE,
    TERM_TYPE,
    Program,
    cel_path,
    cel_string,
    cel_strings,
    cel_value,
    patch_op,
    preference_matches,
    typed,
)
from schedpolicy.core.wellknown import (
    GFD_PRODUCT,
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
)

MAX_INSTANCE_TYPE_VALUES = 512


def gpus_requested_cel() -> str:
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


# Each alternative term's match expressions, with the CEL saying whether it is alive for a
# pod without required terms.
Alternatives = list[tuple[list[dict[str, Any]], str]]


def _gpu_requirement(
    prog: Program, placement: Placement, model_key: str, memory_key: str
) -> tuple[str, Alternatives]:
    """Variables for the GPU requirement: CEL saying whether it applies to the pod, and, for
    each alternative term (label, then launch), which of the pod's own terms it stays alive
    ANDed into (`gpuLive<i>`), and whether it is alive for a pod without terms
    (`gpuAlive<i>`: only the nodeSelector can rule it out)."""
    if placement.gpu is None:
        return "false", []
    alternatives = [alt for _, alt in hints.gpu_alternatives(placement, model_key, memory_key)]
    prog.var("terms", f"{NODE_AFFINITY_EXPR}.?{REQUIRED_FIELD}.?nodeSelectorTerms.orValue([])")
    prog.var("nodeSelector", "has(object.spec.nodeSelector) ? object.spec.nodeSelector : {}")
    # hints._gpu_affinity through node_terms.and_into: every alternative ANDed into every
    # term of the pod's, and the products that can match no node left out (an empty term
    # of the pod's matches none). The products themselves are built in the patch.
    alive: Alternatives = []
    for i, alt in enumerate(alternatives):
        dead = compiled_terms.dead("t", alt, "variables.nodeSelector")
        prog.var(
            f"gpuLive{i}",
            f"variables.terms.filter(t, !{compiled_terms.is_empty('t')} && !{dead})",
        )
        contradicted = compiled_terms.contradicted(alt, "variables.nodeSelector")
        prog.var(f"gpuAlive{i}", f"!has(object.spec.nodeSelector) || !({contradicted})")
        alive.append((alt, f"variables.gpuAlive{i}"))
    constrained = (
        "variables.terms.exists(t, t.?matchExpressions.orValue([])"
        f".exists(e, e.key in {cel_strings([model_key, memory_key])}))"
    )
    live = " || ".join(f"size(variables.gpuLive{i}) > 0" for i in range(len(alternatives)))
    prog.var(
        "gpuApply",
        f"variables.gpus && !{constrained} && (size(variables.terms) == 0"
        f" ? {' || '.join(a for _, a in alive) or 'false'} : {live or 'false'})",
    )
    types = gpu_offers.instance_types_for(placement.gpu.models, placement.gpu.min_memory_mib)
    prog.injected.append(("gpuAffinity", "variables.gpuApply"))
    prog.why.append(
        f"GPU affinity: {model_key} in {list(placement.gpu.models)} and {memory_key} >"
        f" {placement.gpu.min_memory_mib - 1}, ANDed into each required term"
        + (f"; then each term again with instance types {', '.join(types)}" if types else "")
        + "; In lists on one key intersected, and terms that can match no node left out"
    )
    return "variables.gpuApply", alive


def _gpu_terms(alternatives: Alternatives) -> str:
    """CEL: the required terms the pod is given, built of the pod schema's types: each
    alternative alone (when alive) for a pod without terms, else each one ANDed into the
    pod's terms it stays alive with (node_terms.merge)."""
    alone = " + ".join(
        f"({alive} ? [{TERM_TYPE}{{matchExpressions: {typed(EXPRESSION_TYPE, alt)}}}] : [])"
        for alt, alive in alternatives
    )
    merged = " + ".join(
        f"variables.gpuLive{i}.map(t, {compiled_terms.merge('t', alt)})"
        for i, (alt, _) in enumerate(alternatives)
    )
    return f"(size(variables.terms) == 0 ? {alone} : {merged})"


# (preferred term, whether only a pod without GPUs gets it)
Candidates = list[tuple[dict[str, Any], bool]]


def _candidates(
    prog: Program, placement: Placement, known: list[str], model_key: str
) -> Candidates | tuple[str, str]:
    """The preferred terms hints.decide may add, or (feature, why) past the bounds."""
    candidates: Candidates = []
    if placement.capacity_type is not None:
        weight = placement.capacity_type.weight
        for key, value in hints.CAPACITY_LABELS[placement.capacity_type.prefer]:
            expr = {"key": key, "operator": "In", "values": [value]}
            candidates.append((hints.preferred_term(weight, expr), False))
    values = 0
    for pref in placement.instance_types or []:
        matching = [t for t in known if t.startswith(pref.prefix + ".") or t == pref.prefix]
        values += len(matching)
        if matching:
            expr = {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": matching}
            candidates.append((hints.preferred_term(pref.weight, expr), False))
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
        candidates.append((avoid, True))
    return candidates


def affinity_patches(
    prog: Program,
    placement: Placement,
    known: list[str],
    model_key: str,
    memory_key: str,
) -> tuple[str, str] | None:
    gpu_apply, alternatives = _gpu_requirement(prog, placement, model_key, memory_key)
    candidates = _candidates(prog, placement, known, model_key)
    if isinstance(candidates, tuple):
        return candidates
    added_any = _preference_vars(prog, candidates)
    prog.var("affinityChange", f"{gpu_apply} || {added_any}")
    added = "".join(
        f" + (variables.addPref{i} ? [{typed(PREFERRED_TYPE, pref)}] : [])"
        for i, (pref, _) in enumerate(candidates)
    )
    kept = f"{NODE_AFFINITY_EXPR}.?{REQUIRED_FIELD}"
    required = kept
    if alternatives:
        required = (
            f"variables.gpuApply ? optional.of({REQUIRED_TYPE}{{nodeSelectorTerms:"
            f" {_gpu_terms(alternatives)}}}) : {kept}"
        )
    node = (
        f"{NODE_AFFINITY_TYPE}{{?{REQUIRED_FIELD}: {required}, ?{PREFERRED_FIELD}:"
        f" (size(variables.existingPrefs) > 0 || {added_any})"
        f" ? optional.of(variables.existingPrefs{added}) : optional.none()}}"
    )
    affinity = (
        f"{AFFINITY_TYPE}{{?podAffinity: {AFFINITY_EXPR}.?podAffinity,"
        f" ?podAntiAffinity: {AFFINITY_EXPR}.?podAntiAffinity,"
        f" ?nodeAffinity: variables.affinityChange ? optional.of({node}) : optional.none()}}"
    )
    # hints.decide drops an empty nodeAffinity even when it adds nothing to it.
    empty = (
        f"{NODE_AFFINITY_EXPR}.hasValue() && !{NODE_AFFINITY_EXPR}.?{REQUIRED_FIELD}.hasValue()"
        f" && !{NODE_AFFINITY_EXPR}.?{PREFERRED_FIELD}.hasValue()"
    )
    rebuilt = (
        f"(variables.affinityChange || ({empty})"
        f" ? [{patch_op('add', cel_path('/spec/affinity'), affinity)}] : [])"
    )
    prog.patches.append(
        f"(has(object.spec.affinity) ? {rebuilt} : {_first_affinity(alternatives, candidates)})"
    )
    return None


def _preference_vars(prog: Program, candidates: Candidates) -> str:
    """Variables saying which preferred terms a pod is given (those it lacks); returns the
    CEL saying whether any is."""
    prog.var("existingPrefs", f"{NODE_AFFINITY_EXPR}.?{PREFERRED_FIELD}.orValue([])")
    for i, (pref, without_gpus) in enumerate(candidates):
        cond = "!variables.gpus" if without_gpus else "true"
        prog.var(
            f"addPref{i}",
            f"({cond}) && !variables.existingPrefs.exists(p, {preference_matches(pref)})",
        )
    if not candidates:
        return "false"
    # A pod with no affinity has no preferred terms to compare with: what it is given
    # depends on its GPUs alone.
    first = "true" if not all(without for _, without in candidates) else "!variables.gpus"
    compared = " || ".join(f"variables.addPref{i}" for i in range(len(candidates)))
    prog.var("prefsAdded", f"has(object.spec.affinity) ? ({compared}) : {first}")
    prog.injected.append(("preferredAffinity", "variables.prefsAdded"))
    return "variables.prefsAdded"


def _first_affinity(alternatives: Alternatives, candidates: Candidates) -> str:
    """CEL: the patch for a pod that has no affinity: a literal chosen by `variables.gpus`
    and, for a pod with GPUs, by which alternative terms its nodeSelector leaves alive (one
    literal when nothing depends on either), so the apiserver builds each value once."""

    def added(alive: tuple[bool, ...] | None) -> str:
        node: dict[str, Any] = {}
        on = alive or (False,) * len(alternatives)
        terms = [{"matchExpressions": a} for (a, _), o in zip(alternatives, on, strict=True) if o]
        if terms:
            node[REQUIRED_FIELD] = {"nodeSelectorTerms": terms}
        gpus = alive is not None
        prefs = [pref for pref, without_gpus in candidates if not (gpus and without_gpus)]
        if prefs:
            node[PREFERRED_FIELD] = prefs
        if not node:
            return "[]"
        value = cel_value({"nodeAffinity": node})
        return f"[{patch_op('add', cel_path('/spec/affinity'), value)}]"

    def choose(alive: tuple[bool, ...]) -> str:
        if len(alive) == len(alternatives):
            return added(alive)
        var = alternatives[len(alive)][1]
        return f"({var} ? {choose((*alive, True))} : {choose((*alive, False))})"

    if alternatives or any(without_gpus for _, without_gpus in candidates):
        return f"(variables.gpus ? {choose(())} : {added(None)})"
    return added(None)
