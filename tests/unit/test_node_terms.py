"""Hinted required terms against the scheduler's own semantics: no term left that can match
no node, and nothing lost or gained.

`admits` is written from the scheduler's code, not from node_terms.py:
k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go (v0.37.2;
kubernetes/kubernetes staging/src/k8s.io/component-helpers/...) ORs the required
nodeSelectorTerms, skips an empty term ("selects no objects"), ANDs the expressions of a
term, matches nothing with a term that fails to parse, and ANDs the pod's nodeSelector
(GetRequiredNodeAffinity). Each expression is a labels.Requirement
(k8s.io/apimachinery/pkg/labels/selector.go: NewRequirement validates it, Matches compares
with strconv.ParseInt for Gt and Lt); matchFields are field selectors on metadata.name.

Each case's nodes are every combination of the values its pod, its hints and its policy
name (and a value none names, an absent label, and the integers around each bound), so a
term that some node could match has a witness among them.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import jsonpatch
import pytest

from schedpolicy.core.api import parse_spec
from schedpolicy.core.placement import node_terms
from schedpolicy.core.placement.hints import decide
from schedpolicy.core.policy.matching import Policy

MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"
TYPE, POOL, ZONE, GEN = (
    "node.kubernetes.io/instance-type",
    "karpenter.sh/nodepool",
    "topology.kubernetes.io/zone",
    "example.com/generation",
)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

# ---- the scheduler's semantics ------------------------------------------------------------

Node = tuple[str, Mapping[str, str]]  # name, labels
Match = Callable[[Node], bool]
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64)."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


def _requirement(e: Mapping[str, Any]) -> Match | None:
    """labels.NewRequirement (None: a parse error), then Requirement.Matches."""
    key, op, values = e["key"], e["operator"], list(e.get("values") or [])
    if any(len(v) > 63 or not _LABEL_VALUE.fullmatch(v) for v in values):
        return None
    if (op in ("In", "NotIn") and not values) or (op in ("Exists", "DoesNotExist") and values):
        return None
    if op == "In":
        return lambda n: key in n[1] and n[1][key] in values
    if op == "NotIn":
        return lambda n: key not in n[1] or n[1][key] not in values
    if op == "Exists":
        return lambda n: key in n[1]
    if op == "DoesNotExist":
        return lambda n: key not in n[1]
    bound = _parse_int(values[0]) if len(values) == 1 else None
    if op not in ("Gt", "Lt") or bound is None:
        return None

    def compare(n: Node) -> bool:
        have = _parse_int(n[1][key]) if key in n[1] else None
        return have is not None and (have > bound if op == "Gt" else have < bound)

    return compare


def _field(e: Mapping[str, Any]) -> Match | None:
    """nodeSelectorRequirementsAsFieldSelector: In or NotIn, one value, on the node's name."""
    values = list(e.get("values") or [])
    if e["operator"] not in ("In", "NotIn") or len(values) != 1 or e["key"] != "metadata.name":
        return None
    return (lambda n: n[0] == values[0]) if e["operator"] == "In" else lambda n: n[0] != values[0]


def _term(term: Mapping[str, Any]) -> Match:
    parts = [_requirement(e) for e in term.get("matchExpressions") or []]
    parts += [_field(e) for e in term.get("matchFields") or []]
    if any(p is None for p in parts):
        return lambda n: False
    return lambda n: all(p(n) for p in parts if p is not None)


def admits(spec: Mapping[str, Any]) -> Match:
    """Whether the scheduler lets a pod of `spec` on a node (RequiredNodeAffinity.Match)."""
    selector = spec.get("nodeSelector") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    terms = None
    if required is not None:
        # NewLazyErrorNodeSelector: an empty term selects no objects, and is skipped.
        terms = [
            _term(t)
            for t in required.get("nodeSelectorTerms") or []
            if t.get("matchExpressions") or t.get("matchFields")
        ]

    def match(n: Node) -> bool:
        if any(n[1].get(k) != v for k, v in selector.items()):
            return False
        return terms is None or any(t(n) for t in terms)

    return match


# ---- the nodes a case is checked on -------------------------------------------------------


def _expressions(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    for term in (node_affinity.get(REQUIRED) or {}).get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            yield "label", e
        for e in term.get("matchFields") or []:
            yield "field", e
    for key, value in (spec.get("nodeSelector") or {}).items():
        yield "label", {"key": key, "operator": "In", "values": [value]}


def nodes(*specs: Mapping[str, Any]) -> list[Node]:
    """Every combination of the values the specs name, one none names, an absent label,
    and the integers around each (with a leading zero: "02" is 2 to ParseInt, not to In)."""
    values: dict[str, set[str | None]] = {}
    names = {"n-other"}
    for spec in specs:
        for kind, e in _expressions(spec):
            if kind == "field":
                names.update(e.get("values") or [])
                continue
            seen = values.setdefault(e["key"], {None, "zz"})
            for v in e.get("values") or []:
                seen.add(v)
                if (n := _parse_int(v)) is not None:
                    seen.update({str(n + 1), f"0{n + 1}", *([str(n - 1)] if n > 0 else [])})
    keys = sorted(values)
    out: list[Node] = []
    for name in sorted(names):
        for combo in itertools.product(*(sorted(values[k], key=str) for k in keys)):
            out.append((name, {k: v for k, v in zip(keys, combo, strict=True) if v is not None}))
    return out


# ---- node_terms.dead, term by term ------------------------------------------------------


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def term(*exprs: dict[str, Any], fields: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"matchExpressions": list(exprs)} if exprs else {}
    if fields:
        out["matchFields"] = list(fields)
    return out


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}


NAME = "metadata.name"
TERMS = {
    # id: (term, the pod's nodeSelector)
    "in-lists-share-nothing": (
        term(expr(TYPE, "In", "p4d.24xlarge"), expr(TYPE, "In", "p5.48xlarge")),
        {},
    ),
    "in-lists-share-one": (term(expr(TYPE, "In", "a", "b"), expr(TYPE, "In", "b", "c")), {}),
    "notin-covers-in": (term(expr(TYPE, "In", "a", "b"), expr(TYPE, "NotIn", "b", "a")), {}),
    "notin-leaves-one": (term(expr(TYPE, "In", "a", "b"), expr(TYPE, "NotIn", "a")), {}),
    "notin-alone": (term(expr(TYPE, "NotIn", "a", "b", "c")), {}),
    "exists-and-not": (term(expr(POOL, "Exists"), expr(POOL, "DoesNotExist")), {}),
    "in-and-not-exists": (term(expr(POOL, "In", "x"), expr(POOL, "DoesNotExist")), {}),
    "gt-and-not-exists": (term(expr(GEN, "Gt", "3"), expr(GEN, "DoesNotExist")), {}),
    "notin-and-not-exists": (term(expr(POOL, "NotIn", "x"), expr(POOL, "DoesNotExist")), {}),
    "gt-lt-adjacent": (term(expr(GEN, "Gt", "1"), expr(GEN, "Lt", "2")), {}),
    "gt-lt-one-between": (term(expr(GEN, "Gt", "1"), expr(GEN, "Lt", "3")), {}),
    "gt-lt-with-leading-zero": (
        term(expr(GEN, "Gt", "1"), expr(GEN, "Lt", "3"), expr(GEN, "NotIn", "2")),
        {},
    ),
    "lt-zero": (term(expr(GEN, "Lt", "0")), {}),
    "lt-one": (term(expr(GEN, "Lt", "1")), {}),
    "gt-max": (term(expr(GEN, "Gt", str(2**63 - 1))), {}),
    "gt-not-an-integer": (term(expr(GEN, "Gt", "abc"), expr(ZONE, "Exists")), {}),
    "gt-past-int64": (term(expr(GEN, "Gt", "99999999999999999999")), {}),
    "in-against-gt": (term(expr(GEN, "In", "x", "4"), expr(GEN, "Gt", "3")), {}),
    "in-below-gt": (term(expr(GEN, "In", "x", "3"), expr(GEN, "Gt", "3")), {}),
    "selector-fails-in": (term(expr(MODEL, "In", "A100")), {MODEL: "L4"}),
    "selector-meets-in": (term(expr(MODEL, "In", "A100")), {MODEL: "A100"}),
    "selector-fails-not-exists": (term(expr(MODEL, "DoesNotExist")), {MODEL: "A100"}),
    "selector-fails-gt": (term(expr(MEMORY, "Gt", "40959")), {MEMORY: "24576"}),
    "selector-other-key": (term(expr(MODEL, "DoesNotExist")), {ZONE: "a"}),
    "fields-two-names": (term(fields=[expr(NAME, "In", "n1"), expr(NAME, "In", "n2")]), {}),
    "fields-in-and-notin": (term(fields=[expr(NAME, "In", "n1"), expr(NAME, "NotIn", "n1")]), {}),
    "fields-alive": (term(expr(ZONE, "In", "a"), fields=[expr(NAME, "NotIn", "n1")]), {}),
    "empty": (term(), {}),
}


@pytest.mark.parametrize(("one", "selector"), TERMS.values(), ids=TERMS.keys())
def test_dead_is_what_no_node_matches(one: dict[str, Any], selector: dict[str, str]) -> None:
    spec = {"nodeSelector": selector, "affinity": required(one)}
    matched = [n for n in nodes(spec) if admits(spec)(n)]
    why = node_terms.dead(one, selector)
    assert (why is None) == bool(matched), (why, matched[:3])


# ---- hints, pod by pod --------------------------------------------------------------------

A100_H100 = ["A100", "H100"]
P5 = ["p5.48xlarge", "p5.4xlarge"]  # the verified table's H100 types with >= 40960 MiB


def policy(models: list[str]) -> Policy:
    gpu = {"models": models, "minMemoryMiB": 40960}
    return Policy(name="p", generation=1, spec=parse_spec({"placement": {"gpu": gpu}}))


def gpu_pod(**spec: Any) -> dict[str, Any]:
    limits = {"limits": {"nvidia.com/gpu": "1"}}
    return {
        "metadata": {"labels": {"app": "train"}},
        "spec": {"containers": [{"name": "c", "resources": limits}], **spec},
    }


def hinted(pol: Policy, pod: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    decision = decide(pol, pod)
    out = jsonpatch.apply_patch(copy.deepcopy(pod), decision.json_patch(pod))
    return out, decision


def keys(spec: Mapping[str, Any]) -> list[list[str]]:
    terms = spec["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    return [[e["key"] for e in t.get("matchExpressions") or []] for t in terms]


LABEL, LAUNCH = [MODEL, MEMORY], [TYPE, POOL, MODEL]
PODS = {
    # id: (models, the pod's affinity, its nodeSelector, the keys of each term it ends
    # with; None: the GPU affinity is not added)
    "fresh": (["H100"], None, {}, [LABEL, LAUNCH]),
    "p4d-pod-p5-policy": (
        ["H100"],
        required(term(expr(TYPE, "In", "p4d.24xlarge"))),
        {},
        [[TYPE, *LABEL]],
    ),
    "in-lists-intersected": (
        ["H100"],
        required(term(expr(TYPE, "In", "p4d.24xlarge", "p5.48xlarge"))),
        {},
        [[TYPE, *LABEL], LAUNCH],
    ),
    "notin-every-type": (
        ["H100"],
        required(term(expr(TYPE, "NotIn", *P5))),
        {},
        [[TYPE, *LABEL]],
    ),
    "notin-some-types": (
        ["H100"],
        required(term(expr(TYPE, "NotIn", "p5.4xlarge"))),
        {},
        [[TYPE, *LABEL], [TYPE, *LAUNCH]],
    ),
    "off-karpenter": (["H100"], required(term(expr(POOL, "DoesNotExist"))), {}, [[POOL, *LABEL]]),
    "one-own-term-dead-for-launch": (
        ["H100"],
        required(term(expr(TYPE, "In", "p4d.24xlarge")), term(expr(ZONE, "In", "a"))),
        {},
        [[TYPE, *LABEL], [ZONE, *LABEL], [ZONE, *LAUNCH]],
    ),
    "empty-own-term-dropped": (
        ["H100"],
        required(term(), term(expr(ZONE, "In", "a"))),
        {},
        [[ZONE, *LABEL], [ZONE, *LAUNCH]],
    ),
    "fields-only": (["H100"], required(term(fields=[expr(NAME, "In", "n1")])), {}, [LABEL, LAUNCH]),
    "selector-names-accepted-model": (["A100", "H100"], None, {MODEL: "A100"}, [LABEL]),
    "selector-names-a-p4d": (["H100"], None, {TYPE: "p4d.24xlarge"}, [LABEL]),
    "selector-too-little-memory": (["H100"], None, {MEMORY: "24576"}, [LAUNCH]),
    # Every alternative dead: the pod keeps its own constraints.
    "selector-names-other-model": (A100_H100, None, {MODEL: "L4"}, None),
    "own-term-dead-by-itself": (
        A100_H100,
        required(term(expr(ZONE, "In", "a"), expr(ZONE, "In", "b"))),
        {},
        None,
    ),
    "own-range-empty": (
        A100_H100,
        required(term(expr(GEN, "Gt", "1"), expr(GEN, "Lt", "2"))),
        {},
        None,
    ),
    "own-fields-contradict": (
        A100_H100,
        required(term(fields=[expr(NAME, "In", "n1"), expr(NAME, "NotIn", "n1")])),
        {},
        None,
    ),
}


@pytest.mark.parametrize(("models", "affinity", "selector", "ends"), PODS.values(), ids=PODS.keys())
def test_hinted_terms_are_alive_and_allow_exactly_the_intersection(
    models: list[str],
    affinity: dict[str, Any] | None,
    selector: dict[str, str],
    ends: list[list[str]] | None,
) -> None:
    pol = policy(models)
    pod = gpu_pod(**({"affinity": affinity} if affinity else {}), nodeSelector=selector)
    out, decision = hinted(pol, pod)
    alone, _ = hinted(pol, gpu_pod())  # what the hint allows by itself
    universe = nodes(pod["spec"], out["spec"], alone["spec"])
    own, hint, both = admits(pod["spec"]), admits(alone["spec"]), admits(out["spec"])
    if ends is None:
        # No alternative could match a node the pod allows: it keeps its own constraints.
        assert "gpuAffinity" not in decision.injected
        assert out["spec"].get("affinity") == affinity
        assert not any(own(n) and hint(n) for n in universe)
        assert any("GPU affinity: not added" in line for line in decision.explanation)
        return
    assert "gpuAffinity" in decision.injected
    assert keys(out["spec"]) == ends
    # (a) every term emitted can match some node, with the pod's nodeSelector
    for one in out["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]:
        alive = admits({"nodeSelector": selector, "affinity": required(one)})
        assert any(alive(n) for n in universe), one
    # (b) nothing lost, nothing gained
    wrong = [n for n in universe if both(n) != (own(n) and hint(n))]
    assert wrong == [], wrong[:3]
    # Hinting again changes nothing.
    assert decide(pol, out).changes == {}


def test_the_p4d_pod_keeps_its_own_type_and_the_explanation_says_what_was_left_out() -> None:
    pod = gpu_pod(affinity=required(term(expr(TYPE, "In", "p4d.24xlarge", "p5.48xlarge"))))
    out, decision = hinted(policy(["H100"]), pod)
    terms = out["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    # One In on the instance type, holding the types both lists name, not two to AND.
    assert terms[1]["matchExpressions"] == [
        expr(TYPE, "In", "p5.48xlarge"),
        expr(POOL, "Exists"),
        expr(MODEL, "DoesNotExist"),
    ]
    only_p4d = gpu_pod(affinity=required(term(expr(TYPE, "In", "p4d.24xlarge"))))
    _, decision = hinted(policy(["H100"]), only_p4d)
    [line] = [x for x in decision.explanation if x.startswith("GPU affinity")]
    assert "left out 1 term(s) that could match no node" in line
    assert "the launch term with the pod's term 1" in line
    assert f"{TYPE} In [p4d.24xlarge] and {TYPE} In [{', '.join(P5)}] share no value" in line


def test_when_every_alternative_is_dead_the_explanation_says_why_and_what_stays() -> None:
    pod = gpu_pod(nodeSelector={MODEL: "L4"})
    out, decision = hinted(policy(A100_H100), pod)
    [line] = [x for x in decision.explanation if x.startswith("GPU affinity")]
    assert "not added" in line
    assert f"nodeSelector {MODEL}=L4 fails {MODEL} In [A100, H100]" in line
    assert f"nodeSelector {MODEL}=L4 fails {MODEL} DoesNotExist" in line
    assert "the pod keeps its own constraints" in line
    # The other hints still apply.
    assert out["spec"]["schedulerName"] == "schedpolicy-scheduler"


@pytest.mark.parametrize("value", ["0", "007", str(2**63 - 1), "0" * 40 + "12"])
def test_int64_pattern_accepts_what_parseint_does(value: str) -> None:
    assert node_terms.is_int64(value)
    assert _parse_int(value) is not None


@pytest.mark.parametrize("value", ["", "x1", "1.5", str(2**63), "99999999999999999999", "1e3"])
def test_int64_pattern_refuses_what_parseint_refuses(value: str) -> None:
    # Signs aside: a label value never starts with one.
    assert not node_terms.is_int64(value)
    assert _parse_int(value) is None
