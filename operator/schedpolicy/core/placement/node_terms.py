"""Required node selector terms as the scheduler reads them, and ours ANDed into a pod's own
without leaving a term that can match no node. Pure.

The scheduler (k8s.io/component-helpers/scheduling/corev1/nodeaffinity) ORs a pod's
nodeSelectorTerms, skips an empty term (it "selects no objects"), ANDs the expressions
within a term, and ANDs the pod's nodeSelector with all of it. A term whose Gt or Lt value
is not an int64 fails to parse and matches nothing.

When hints AND our alternatives into each of the pod's terms, some products can match no
node: the pod's `instance-type In [p4d.24xlarge]` with the launch term's `In [p5...]`, or
our `gpu-model DoesNotExist` beside a nodeSelector that names a model. Such a term changes
nothing about where the pod may run, but Karpenter tries the terms in turn and a reader sees
a requirement that cannot hold, so it is left out. Two `In` lists on one key are intersected
into the pod's own expression rather than listed twice.

`dead` proves a term dead key by key, with the operators' semantics (labels.Requirement):
- an `In` none of whose values satisfies every other expression on its key (so In lists
  that share nothing, In against NotIn, In against DoesNotExist, In against Gt/Lt);
- DoesNotExist beside Exists, Gt or Lt;
- Gt and Lt that leave no integer between them (a label value is never negative);
- a nodeSelector value that fails an expression on its key;
- an empty term, or a Gt/Lt value that is not an int64.
NotIn lists are finite and label values are not, so NotIn alone never kills a key. A
Gt/Lt range is taken as alive even if NotIn lists every spelling of its integers ("2",
"02", ...): that is the one case left unproven. compiled_terms.py is the same rule in CEL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Expression = Mapping[str, Any]
Term = Mapping[str, Any]

MAX_INT64 = 2**63 - 1
PRESENT = frozenset({"Exists", "Gt", "Lt"})  # the operators a missing label fails


def _at_most(limit: int) -> str:
    """A regular expression (RE2 and Python alike) for the decimal strings, leading zeros
    allowed and no sign, of the integers 0..`limit`: what strconv.ParseInt accepts of a
    label value (label values never start with a sign)."""
    digits = str(limit)
    shorter = f"[0-9]{{1,{len(digits) - 1}}}"
    same = [
        f"{digits[:i]}[0-{int(d) - 1}][0-9]{{{len(digits) - i - 1}}}"
        for i, d in enumerate(digits)
        if d != "0"
    ]
    return "^0*(?:" + "|".join([shorter, *same, digits]) + ")$"


INT64_PATTERN = _at_most(MAX_INT64)
_INT64 = re.compile(INT64_PATTERN)


def is_int64(value: str) -> bool:
    return _INT64.match(value) is not None


def satisfies(expr: Expression, value: str) -> bool:
    """Whether a label present with `value` satisfies `expr` (labels.Requirement.Matches)."""
    op, values = expr.get("operator"), list(expr.get("values") or [])
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return True
    if op in ("Gt", "Lt") and values and is_int64(value) and is_int64(values[0]):
        bound = int(values[0])
        return int(value) > bound if op == "Gt" else int(value) < bound
    return False


def describe(expr: Expression) -> str:
    op, values = expr.get("operator"), [str(v) for v in expr.get("values") or []]
    shown = (
        f" [{', '.join(values)}]" if op in ("In", "NotIn") else f" {values[0]}" if values else ""
    )
    return f"{expr.get('key')} {op}{shown}"


def is_empty(term: Term) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


def dead(term: Term, node_selector: Mapping[str, str] | None = None) -> str | None:
    """Why no node can match `term` (with the pod's nodeSelector), or None if one may."""
    if is_empty(term):
        return "an empty term matches no node"
    exprs = list(term.get("matchExpressions") or [])
    selector = node_selector or {}
    for e in exprs:
        if e.get("operator") in ("Gt", "Lt") and not is_int64((e.get("values") or [""])[0]):
            return f"{describe(e)} is not an integer, so the term does not parse"
    for e in exprs:
        key = e.get("key", "")
        if key in selector and not satisfies(e, selector[key]):
            return f"the pod's nodeSelector {key}={selector[key]} fails {describe(e)}"
    return _dead_key(exprs) or _dead_key(list(term.get("matchFields") or []))


def _dead_key(exprs: Sequence[Expression]) -> str | None:
    """The first key of `exprs` that no label (or field) can satisfy, and why."""

    def on(key: str) -> list[Expression]:
        return [f for f in exprs if f.get("key") == key]

    for e in exprs:
        same = on(e.get("key", ""))
        if e.get("operator") == "In" and not any(
            all(satisfies(f, v) for f in same) for v in e.get("values") or []
        ):
            return "no value satisfies " + " and ".join(describe(f) for f in same)
        if e.get("operator") == "DoesNotExist" and any(f.get("operator") in PRESENT for f in same):
            return "no node has and lacks a label: " + " and ".join(describe(f) for f in same)
        if e.get("operator") in ("Gt", "Lt") and _empty_range(same):
            return "no integer satisfies " + " and ".join(describe(f) for f in same)
    return None


def _empty_range(same: Iterable[Expression]) -> bool:
    # Label values are unsigned, so Lt 0 leaves nothing; nothing is above MAX_INT64.
    above = [int(f["values"][0]) for f in same if f.get("operator") == "Gt"]
    below = [int(f["values"][0]) for f in same if f.get("operator") == "Lt"]
    low, high = max(above, default=-1), min(below, default=MAX_INT64 + 1)
    return high - 1 <= low


def merge(term: Term, ours: Sequence[Expression]) -> dict[str, Any]:
    """`term` with `ours` ANDed in. Where both have `In` on a key, the pod's expression keeps
    the values ours also lists (in its own order) and ours is not added."""
    own = list(term.get("matchExpressions") or [])
    narrow = {o["key"]: o["values"] for o in ours if o["operator"] == "In"}
    own_in = {e.get("key") for e in own if e.get("operator") == "In"}
    exprs = [
        {**e, "values": [v for v in e.get("values") or [] if v in narrow[e["key"]]]}
        if e.get("operator") == "In" and e.get("key") in narrow
        else e
        for e in own
    ]
    exprs += [o for o in ours if not (o["operator"] == "In" and o["key"] in own_in)]
    return {**term, "matchExpressions": exprs}


@dataclass(frozen=True)
class Merged:
    """The terms left after ANDing each alternative into each of the pod's terms, and why
    each term left out can match no node."""

    terms: tuple[dict[str, Any], ...]
    dropped: tuple[str, ...]


def and_into(
    terms: Sequence[Term],
    alternatives: Sequence[tuple[str, Sequence[Expression]]],
    node_selector: Mapping[str, str] | None = None,
) -> Merged:
    """Each named alternative ANDed into each of the pod's `terms` (into one term if it has
    none), alternative by alternative, as the scheduler ORs them; dead products left out."""
    kept: list[dict[str, Any]] = []
    dropped: list[str] = []
    for name, ours in alternatives:
        for i, term in enumerate(terms or [{}]):
            where = f"{name} with the pod's term {i + 1}" if terms else name
            why = "the pod's own term is empty" if terms and is_empty(term) else None
            merged = merge(term, ours)
            why = why or _disjoint(term, ours) or dead(merged, node_selector)
            if why is None:
                kept.append(merged)
            else:
                dropped.append(f"{where}: {why}")
    return Merged(tuple(kept), tuple(dropped))


def _disjoint(term: Term, ours: Sequence[Expression]) -> str | None:
    """Why `merge` leaves an In of the pod's with no value, in the lists' own words."""
    for o in ours:
        for e in term.get("matchExpressions") or []:
            same_in = o["operator"] == e.get("operator") == "In" and o["key"] == e.get("key")
            if same_in and not set(e.get("values") or []) & set(o["values"]):
                return f"{describe(e)} and {describe(o)} share no value"
    return None
