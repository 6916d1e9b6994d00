"""node_terms.py in CEL: ANDing our terms into a pod's own inside the apiserver, with the
same intersection of `In` lists and the same dead terms left out. Pure.

Each function returns CEL text over CEL expressions it is given (the pod's term, the
nodeSelector map) and our constant expressions. The rules are node_terms.dead's, one for
one, so that a compiled policy stores the pod the webhook would
(tests/e2e/test_admission_policy.py).
Every `int()` is guarded by node_terms.INT64_PATTERN: a Gt or Lt value that is not an
int64 makes the term dead, never the policy's evaluation fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schedpolicy.core.placement import node_terms
from schedpolicy.core.placement.cel import (
    EXPRESSION_TYPE,
    TERM_TYPE,
    cel_string,
    cel_strings,
    typed,
)

_INT = cel_string(node_terms.INT64_PATTERN)
_PRESENT = cel_strings(sorted(node_terms.PRESENT))


def _sat(f: str, v: str) -> str:
    """CEL: a label present with value `v` satisfies the expression `f` (node_terms.satisfies)."""
    ints = f"{v}.matches({_INT}) && {f}.values[0].matches({_INT})"
    return (
        f"(({f}.operator == 'In' && {v} in {f}.values)"
        f" || ({f}.operator == 'NotIn' && !({v} in {f}.values))"
        f" || {f}.operator == 'Exists'"
        f" || ({f}.operator == 'Gt' && {ints} && int({v}) > int({f}.values[0]))"
        f" || ({f}.operator == 'Lt' && {ints} && int({v}) < int({f}.values[0])))"
    )


def _sat_ours(o: Mapping[str, Any], v: str) -> str:
    """CEL: a label present with value `v` satisfies our constant expression `o`."""
    op, values = o["operator"], list(o.get("values") or [])
    if op == "In":
        return f"{v} in {cel_strings(values)}"
    if op == "NotIn":
        return f"!({v} in {cel_strings(values)})"
    if op == "Exists":
        return "true"
    if op == "DoesNotExist":
        return "false"
    compare = ">" if op == "Gt" else "<"
    return f"({v}.matches({_INT}) && int({v}) {compare} {int(values[0])})"


def dead(term: str, ours: Sequence[Mapping[str, Any]], selector: str) -> str:
    """CEL: the pod's term object `term` with `ours` ANDed in can match no node, with the
    pod's nodeSelector map `selector`: node_terms.dead of node_terms.merge, judged on the
    pod's expressions and ours side by side (narrowing an In to the values both lists
    share changes no key's verdict), so that no object is built: the apiserver allows the
    pod schema's types only in the patch itself, not in variables."""
    own = f"{term}.?matchExpressions.orValue([])"
    fields = f"{term}.?matchFields.orValue([])"
    rules = [
        f"{own}.exists(e, e.operator in ['Gt', 'Lt'] && !e.values[0].matches({_INT}))",
        f"{own}.exists(e, e.key in {selector} && !{_sat('e', f'{selector}[e.key]')})",
        contradicted(ours, selector),
        *_in_rules(own, ours),
        *_absence_rules(own, ours),
        *_range_rules(own, ours),
        _in_rules(fields, ())[0],
    ]
    return "(" + " || ".join(r for r in rules if r != "false") + ")"


def _in_rules(own: str, ours: Sequence[Mapping[str, Any]]) -> list[str]:
    """An In, the pod's or ours, none of whose values satisfies every expression on its
    key, the pod's and ours."""

    def ours_on(key: str, v: str) -> str:
        checks = [
            f"({key} != {cel_string(o['key'])} || {_sat_ours(o, v)})"
            for o in ours
            if o["operator"] != "Exists"
        ]
        return "".join(f" && {c}" for c in checks)

    rules = [
        f"{own}.exists(e, e.operator == 'In' && !e.values.exists(v, {own}.all(f, f.key != e.key"
        f" || {_sat('f', 'v')}){ours_on('e.key', 'v')}))"
    ]
    for o in ours:
        if o["operator"] == "In":
            same = [p for p in ours if p["key"] == o["key"]]
            values = [w for w in o["values"] if all(node_terms.satisfies(p, w) for p in same)]
            key = cel_string(o["key"])
            rules.append(
                f"!{cel_strings(values)}.exists(v, {own}.all(f, f.key != {key}"
                f" || {_sat('f', 'v')}))"
            )
    return rules


def _absence_rules(own: str, ours: Sequence[Mapping[str, Any]]) -> list[str]:
    """DoesNotExist beside Exists, Gt or Lt on one key, the pod's or ours."""
    present = sorted({o["key"] for o in ours if o["operator"] in node_terms.PRESENT})
    absent = sorted({o["key"] for o in ours if o["operator"] == "DoesNotExist"})
    rules = [
        f"{own}.exists(e, e.operator == 'DoesNotExist' && {own}.exists(f, f.key == e.key"
        f" && f.operator in {_PRESENT}))"
    ]
    if present:
        rules.append(
            f"{own}.exists(e, e.operator == 'DoesNotExist' && e.key in {cel_strings(present)})"
        )
    if absent:
        rules.append(f"{own}.exists(f, f.key in {cel_strings(absent)} && f.operator in {_PRESENT})")
    return rules


def _range_rules(own: str, ours: Sequence[Mapping[str, Any]]) -> list[str]:
    """Gt and Lt, the pod's or ours, that leave no integer between them."""
    gt = f"e.operator == 'Gt' && e.values[0].matches({_INT})"
    lt = f"f.operator == 'Lt' && f.values[0].matches({_INT})"
    rules = [
        f"{own}.exists(e, {gt} && (int(e.values[0]) == {node_terms.MAX_INT64}"
        f" || {own}.exists(f, f.key == e.key && {lt}"
        " && int(f.values[0]) - 1 <= int(e.values[0]))))",
        f"{own}.exists(f, {lt} && int(f.values[0]) == 0)",
    ]
    for o in ours:
        if o["operator"] not in ("Gt", "Lt"):
            continue
        key, bound = cel_string(o["key"]), int(o["values"][0])
        if o["operator"] == "Lt":
            rules.append(
                f"{own}.exists(e, e.key == {key} && {gt} && {bound} - 1 <= int(e.values[0]))"
            )
        else:
            rules.append(
                f"{own}.exists(f, f.key == {key} && {lt} && int(f.values[0]) - 1 <= {bound})"
            )
    return rules


def is_empty(term: str) -> str:
    return (
        f"(size({term}.?matchExpressions.orValue([])) == 0"
        f" && size({term}.?matchFields.orValue([])) == 0)"
    )


def merge(term: str, ours: Sequence[Mapping[str, Any]]) -> str:
    """CEL: the pod's term object `term` with `ours` ANDed in, as a term of the pod's schema
    (node_terms.merge): an `In` of the pod's on a key ours has `In` on keeps the values ours
    lists, and ours is then not added."""
    own = f"{term}.?matchExpressions.orValue([])"
    narrowed = own
    for o in ours:
        if o["operator"] == "In":
            key = cel_string(o["key"])
            kept = (
                f"{EXPRESSION_TYPE}{{key: e.key, operator: e.operator,"
                f" values: e.values.filter(v, v in {cel_strings(o['values'])})}}"
            )
            narrowed = f"{narrowed}.map(e, e.operator == 'In' && e.key == {key} ? {kept} : e)"
    parts = [narrowed]
    for o in ours:
        one = f"[{typed(EXPRESSION_TYPE, o)}]"
        if o["operator"] == "In":
            has_in = f"{own}.exists(e, e.operator == 'In' && e.key == {cel_string(o['key'])})"
            one = f"({has_in} ? [] : {one})"
        parts.append(one)
    return (
        f"{TERM_TYPE}{{matchExpressions: {' + '.join(parts)}, ?matchFields: {term}.?matchFields}}"
    )


def contradicted(ours: Sequence[Mapping[str, Any]], selector: str) -> str:
    """CEL: the map `selector` (the pod's nodeSelector) has a value failing one of `ours`, a
    list of constant expressions that is alive by itself: node_terms.dead for a pod with
    no terms of its own, in plain comparisons (no object is built)."""
    fails: list[str] = []
    for o in ours:
        key = cel_string(o["key"])
        value = f"{selector}[{key}]"
        op, values = o["operator"], list(o.get("values") or [])
        if op == "Exists":
            continue
        if op == "DoesNotExist":  # any value fails it
            fails.append(f"{key} in {selector}")
            continue
        if op == "In":
            fail = f"!({value} in {cel_strings(values)})"
        elif op == "NotIn":
            fail = f"{value} in {cel_strings(values)}"
        else:
            compare = ">" if op == "Gt" else "<"
            fail = f"!({value}.matches({_INT}) && int({value}) {compare} {int(values[0])})"
        fails.append(f"({key} in {selector} && {fail})")
    return " || ".join(fails) if fails else "false"
