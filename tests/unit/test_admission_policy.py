"""The MutatingAdmissionPolicy compiler: literals, selectors, precedence and its bounds.

What the compiled CEL does to pods is tested against the real apiserver, beside the
webhook (tests/e2e/test_admission_policy.py); these tables pin the pure parts.
"""

from __future__ import annotations

from typing import Any

import pytest

from schedpolicy.core.api import SchedulingPolicySpec
from schedpolicy.core.placement import cel as cel_text
from schedpolicy.core.placement import compiler as ap
from schedpolicy.core.placement.compiled_affinity import MAX_INSTANCE_TYPE_VALUES
from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.policy.model import LabelSelector


def policy(name: str, priority: int = 0, uid: str = "", **spec: Any) -> Policy:
    body = {"priority": priority, "placement": {}, **spec}
    return Policy(name, SchedulingPolicySpec.model_validate(body), uid=uid)


@pytest.mark.parametrize(
    ("value", "cel"),
    [
        ("plain", "'plain'"),
        ("it's", "'it\\'s'"),
        ("back\\slash", "'back\\\\slash'"),
        ("two\nlines", "'two\\nlines'"),
    ],
)
def test_strings_are_quoted_and_escaped(value: str, cel: str) -> None:
    assert cel_text.cel_string(value) == cel


@pytest.mark.parametrize(
    ("value", "cel"),
    [
        (True, "true"),
        (3, "3"),
        ([], "[]"),
        (["a"], "[dyn('a')]"),
        ({"w": 1, "k": "v"}, "{'w': dyn(1), 'k': dyn('v')}"),
    ],
)
def test_values_wrap_every_element_in_dyn(value: Any, cel: str) -> None:
    assert cel_text.cel_value(value) == cel


@pytest.mark.parametrize(
    ("selector", "cel"),
    [
        (None, "true"),
        ({}, "true"),
        ({"matchLabels": {"app": "web"}}, "L[?'app'] == optional.of('web')"),
        (
            {"matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]},
            "('t' in L && L['t'] in ['a', 'b'])",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]},
            "(!('t' in L) || !(L['t'] in ['a']))",
        ),
        ({"matchExpressions": [{"key": "t", "operator": "Exists"}]}, "'t' in L"),
        ({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, "!('t' in L)"),
    ],
)
def test_selectors_compile_with_kubernetes_semantics(
    selector: dict[str, Any] | None, cel: str
) -> None:
    parsed = LabelSelector.model_validate(selector) if selector is not None else None
    assert cel_text.selector_cel(parsed, "L") == cel


def test_names_stay_dns_subdomains() -> None:
    assert ap.object_name("web") == "schedpolicy-hints-web"
    long = ap.object_name("a" * 253)
    assert len(long) == 253
    assert long != ap.object_name("a" * 252 + "b")


def test_only_earlier_overlapping_policies_are_excluded() -> None:
    mine = policy("mine", 10, podSelector={"matchLabels": {"app": "web"}})
    higher = policy("higher", 20, podSelector={"matchLabels": {"app": "web"}})
    disjoint = policy("disjoint", 30, podSelector={"matchLabels": {"app": "batch"}})
    lower = policy("lower", 5)
    tie_first = policy("a-tie", 10)
    out = ap.compile_policy(
        mine, [mine, higher, disjoint, lower, tie_first], instance_types=(), excluded_namespaces=()
    )
    assert isinstance(out, ap.Compiled)
    governed = next(
        v["expression"] for v in out.body["spec"]["variables"] if v["name"] == "governed"
    )
    assert governed.count("!((") == 2  # higher and a-tie; not disjoint, not lower
    assert "leaves alone pods that higher, a-tie also select" in out.explanation


def test_selectors_and_exclusions_go_to_match_constraints() -> None:
    mine = policy(
        "mine",
        namespaceSelector={"matchLabels": {"team": "ml"}},
        podSelector={"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        uid="u1",
    )
    out = ap.compile_policy(mine, [mine], instance_types=(), excluded_namespaces=["ops"])
    assert isinstance(out, ap.Compiled)
    match = out.body["spec"]["matchConstraints"]
    assert match["namespaceSelector"] == {
        "matchLabels": {"team": "ml"},
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "ops"],
            }
        ],
    }
    assert match["objectSelector"]["matchExpressions"] == [
        {"key": "app", "operator": "Exists"},
        {"key": "schedpolicy.io/ignore", "operator": "DoesNotExist"},
    ]
    assert out.body["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert out.binding["spec"] == {"policyName": "schedpolicy-hints-mine"}
    assert out.body["spec"]["failurePolicy"] == "Ignore"


def test_the_digest_follows_the_inventory() -> None:
    mine = policy("mine", placement={"instanceTypes": [{"prefix": "p5", "weight": 10}]})
    a = ap.compile_policy(mine, [mine], instance_types=["c5.xlarge"], excluded_namespaces=())
    b = ap.compile_policy(mine, [mine], instance_types=["p5.48xlarge"], excluded_namespaces=())
    c = ap.compile_policy(mine, [mine], instance_types=["p5.48xlarge"], excluded_namespaces=())
    assert isinstance(a, ap.Compiled)
    assert isinstance(b, ap.Compiled)
    assert isinstance(c, ap.Compiled)
    assert a.digest != b.digest == c.digest


def test_past_its_bounds_a_policy_stays_on_the_webhook() -> None:
    mine = policy("mine", placement={"instanceTypes": [{"prefix": "p5", "weight": 10}]})
    types = [f"p5.{i}xlarge" for i in range(MAX_INSTANCE_TYPE_VALUES + 1)]
    out = ap.compile_policy(mine, [mine], instance_types=types, excluded_namespaces=())
    assert isinstance(out, ap.Inexpressible)
    assert out.feature == "instanceTypes"
    assert out.message.endswith("the webhook serves this policy")

    many = [policy(f"p{i:03d}", 100) for i in range(ap.MAX_EARLIER_POLICIES + 1)]
    out = ap.compile_policy(policy("last"), many, instance_types=(), excluded_namespaces=())
    assert isinstance(out, ap.Inexpressible)
    assert out.feature == "priority"


def test_only_placement_policies_are_compiled() -> None:
    labels_only = Policy("labels", SchedulingPolicySpec.model_validate({"nodeLabels": {"gpu": {}}}))
    outcomes = ap.compile_all(
        [labels_only, policy("mine")], instance_types=(), excluded_namespaces=()
    )
    assert list(outcomes) == ["mine"]


@pytest.mark.parametrize(
    ("type_name", "value", "cel"),
    [
        ("T", "x", "'x'"),
        ("T", [1, 2], "[1, 2]"),
        ("T", {"key": "k", "values": ["a"]}, "T{key: 'k', values: ['a']}"),
        ("T", [{"w": 1, "p": {"e": []}}], "[T{w: 1, p: T.p{e: []}}]"),
        # A map of the user's keys is a map, not an object of the schema.
        ("T", {"matchLabels": {"app": "web"}}, "T{matchLabels: {'app': 'web'}}"),
    ],
)
def test_values_are_built_of_the_schemas_types(type_name: str, value: Any, cel: str) -> None:
    assert cel_text.typed(type_name, value) == cel


FULL = {
    "gpu": {"models": ["A100"], "minMemoryMiB": 40000},
    "capacityType": {"prefer": "spot"},
    "avoidGPUNodes": True,
    "zoneSpread": {},
    "instanceTypes": [{"prefix": "p4d", "weight": 10}],
}


def _value_literals(expression: str) -> list[str]:
    """Every `value: {...}` of the expression, braces balanced outside CEL strings."""
    found = []
    start = expression.find("value: {")
    while start != -1:
        i, depth, quoted = start + len("value: "), 0, False
        while True:
            c = expression[i]
            if quoted:
                i += 2 if c == "\\" else 1
                quoted = c != "'"
                continue
            quoted = c == "'"
            depth += {"{": 1, "}": -1}.get(c, 0)
            i += 1
            if depth == 0 and c == "}":
                break
        found.append(expression[start:i])
        start = expression.find("value: {", i)
    return found


def test_one_patch_operation_per_top_level_field_and_dyn_only_in_constants() -> None:
    """The compiled policy sets the scheduler, the affinity, the spread and the record with
    one operation each. The affinity's are alternatives: rebuilt from the pod's own, or, for
    a pod without one, a literal: for a pod with GPUs, one for each set of alternative terms
    its nodeSelector leaves alive (label and launch, label, launch, neither), and one for a
    pod without GPUs; the record's are alternatives too. dyn() appears only inside literals
    of constants, which the apiserver's CEL builds once, when it loads the policy."""
    mine = policy("mine", placement=FULL)
    out = ap.compile_policy(mine, [mine], instance_types=["p4d.24xlarge"], excluded_namespaces=())
    assert isinstance(out, ap.Compiled)
    spec = out.body["spec"]
    expression = spec["mutations"][0]["jsonPatch"]["expression"]
    paths = [p.split("'")[1] for p in expression.split("path: ")[1:]]
    assert paths == [
        "/spec/schedulerName",
        *["/spec/affinity"] * 6,
        "/spec/topologySpreadConstraints",
        "/metadata/annotations/schedpolicy.io~1hints",
        "/metadata/annotations",
    ]
    constants = [v for v in _value_literals(expression) if "dyn(" in v]
    assert len(constants) == 5
    for literal in constants:
        assert "variables." not in literal
        assert "object." not in literal
    rest = expression
    for literal in constants:
        rest = rest.replace(literal, "")
    everything = rest + "".join(v["expression"] for v in spec["variables"])
    assert "dyn(" not in everything
    # The instance types and the requirements are constants of the expression.
    assert "p4d.24xlarge" in everything
    assert "'A100'" in everything
    # A pod with GPUs is given the terms its nodeSelector leaves alive; one without GPUs
    # is given none, and the preference for nodes without them.
    both, label, launch, neither, without = constants
    nodepool = "'karpenter.sh/nodepool'"
    assert ("'A100'" in both, nodepool in both) == (True, True)
    assert ("'A100'" in label, nodepool in label) == (True, False)
    assert ("'A100'" in launch, nodepool in launch) == (False, True)
    assert ("'A100'" in neither, nodepool in neither) == (False, False)
    assert ("'A100'" in without, nodepool in without) == (False, False)
    assert "'nvidia.com/gpu.product'" in without
    for literal in (both, label, launch, neither):
        assert "'nvidia.com/gpu.product'" not in literal
