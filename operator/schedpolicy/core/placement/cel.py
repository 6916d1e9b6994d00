"""CEL text for the compiled MutatingAdmissionPolicy: literals, selectors, JSONPatch ops,
and the program (variables, patches, what it injects) being built. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schedpolicy.core.policy.model import LabelSelector


def cel_string(value: str) -> str:
    escaped = (
        value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    )
    return f"'{escaped}'"


def cel_value(value: Any) -> str:
    """A JSON value as a CEL literal. The apiserver's CEL wants homogeneous aggregates, so
    every element and map value is wrapped in dyn(). A literal of constants costs nothing
    per create: cel-go (OptOptimize, as the apiserver evaluates) builds it once."""
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


# Fields whose values are maps of the user's keys, not objects of the pod's schema.
_FREE_MAPS = frozenset({"matchLabels", "labels", "annotations", "nodeSelector"})


def typed(type_name: str, value: Any) -> str:
    """A JSON value as typed CEL: an object of the pod's schema is constructed as its type
    (`Object.spec.affinity{...}`, a list's items take the list field's type), so it can hold
    the pod's own values beside ours. It is built on every create, literal or not."""
    if isinstance(value, Mapping):
        fields = ", ".join(
            f"{k}: {_map(v) if k in _FREE_MAPS else typed(f'{type_name}.{k}', v)}"
            for k, v in value.items()
        )
        return f"{type_name}{{{fields}}}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(typed(type_name, v) for v in value) + "]"
    return cel_value(value)


def _map(value: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{cel_string(k)}: {cel_string(v)}" for k, v in value.items()) + "}"


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


# The pod's affinity as an optional, and the schema types the compiled value is built of.
AFFINITY_EXPR = "object.spec.?affinity"
NODE_AFFINITY_EXPR = f"{AFFINITY_EXPR}.?nodeAffinity"
REQUIRED_FIELD = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_FIELD = "preferredDuringSchedulingIgnoredDuringExecution"
AFFINITY_TYPE = "Object.spec.affinity"
NODE_AFFINITY_TYPE = f"{AFFINITY_TYPE}.nodeAffinity"
REQUIRED_TYPE = f"{NODE_AFFINITY_TYPE}.{REQUIRED_FIELD}"
TERM_TYPE = f"{REQUIRED_TYPE}.nodeSelectorTerms"
EXPRESSION_TYPE = f"{TERM_TYPE}.matchExpressions"
PREFERRED_TYPE = f"{NODE_AFFINITY_TYPE}.{PREFERRED_FIELD}"
SPREAD_TYPE = "Object.spec.topologySpreadConstraints"


def patch_op(op: str, path: str, value: str | None = None) -> str:
    """A JSONPatch literal; `path` is CEL (a quoted literal, or an expression)."""
    value_part = f", value: {value}" if value is not None else ""
    return f"JSONPatch{{op: '{op}', path: {path}{value_part}}}"


def cel_path(path: str) -> str:
    return cel_string(path)


def preference_matches(pref: Mapping[str, Any]) -> str:
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
class Program:
    variables: list[tuple[str, str]]
    injected: list[tuple[str, str]]  # (name in the record, CEL condition)
    patches: list[str]
    why: list[str]

    def var(self, name: str, expression: str) -> None:
        self.variables.append((name, expression))
