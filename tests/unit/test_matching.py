from __future__ import annotations

import itertools
from typing import Any

import pytest

from schedpolicy.core.api import parse_spec
from schedpolicy.core.policy.matching import (
    Policy,
    conflicts,
    governing_node_policy,
    governing_policy,
    selector_matches,
    selectors_may_overlap,
)
from schedpolicy.core.policy.model import LabelSelector


def sel(**raw: Any) -> LabelSelector:
    return LabelSelector.model_validate(raw)


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        (None, {}, True),
        (sel(), {"a": "1"}, True),
        (sel(matchLabels={"a": "1"}), {"a": "1", "b": "2"}, True),
        (sel(matchLabels={"a": "1"}), {"a": "2"}, False),
        (sel(matchLabels={"a": "1"}), {}, False),
        (sel(matchExpressions=[expr("a", "In", "1", "2")]), {"a": "2"}, True),
        (sel(matchExpressions=[expr("a", "In", "1")]), {}, False),
        (sel(matchExpressions=[expr("a", "NotIn", "1")]), {}, True),
        (sel(matchExpressions=[expr("a", "NotIn", "1")]), {"a": "1"}, False),
        (sel(matchExpressions=[expr("a", "Exists")]), {"a": ""}, True),
        (sel(matchExpressions=[expr("a", "DoesNotExist")]), {"a": ""}, False),
        (
            sel(matchLabels={"a": "1"}, matchExpressions=[expr("b", "Exists")]),
            {"a": "1"},
            False,
        ),
    ],
)
def test_selector_matches(
    selector: LabelSelector | None, labels: dict[str, str], matches: bool
) -> None:
    assert selector_matches(selector, labels) is matches


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        (None, None, True),
        (sel(matchLabels={"app": "web"}), None, True),
        (sel(matchLabels={"app": "web"}), sel(matchLabels={"app": "web"}), True),
        (sel(matchLabels={"app": "web"}), sel(matchLabels={"app": "api"}), False),
        (sel(matchLabels={"app": "web"}), sel(matchLabels={"tier": "x"}), True),
        (
            sel(matchLabels={"app": "web"}),
            sel(matchExpressions=[expr("app", "In", "api", "web")]),
            True,
        ),
        (
            sel(matchLabels={"app": "web"}),
            sel(matchExpressions=[expr("app", "NotIn", "web")]),
            False,
        ),
        (
            sel(matchExpressions=[expr("app", "Exists")]),
            sel(matchExpressions=[expr("app", "DoesNotExist")]),
            False,
        ),
        (
            sel(matchExpressions=[expr("app", "DoesNotExist")]),
            sel(matchExpressions=[expr("app", "NotIn", "x")]),
            True,
        ),
        (
            sel(matchExpressions=[expr("app", "In", "a", "b")]),
            sel(matchExpressions=[expr("app", "In", "b", "c")]),
            True,
        ),
        (
            sel(matchExpressions=[expr("app", "In", "a")]),
            sel(matchExpressions=[expr("app", "In", "c")]),
            False,
        ),
        (
            sel(matchExpressions=[expr("app", "In", "a", "b"), expr("app", "NotIn", "b")]),
            sel(matchExpressions=[expr("app", "In", "b")]),
            False,
        ),
    ],
)
def test_selectors_may_overlap(
    a: LabelSelector | None, b: LabelSelector | None, overlap: bool
) -> None:
    assert selectors_may_overlap(a, b) is overlap
    assert selectors_may_overlap(b, a) is overlap


def policy(name: str, priority: int = 0, **spec: Any) -> Policy:
    spec.setdefault("deletionCost", {"signals": [{"type": "NodeConsolidation"}]})
    return Policy(name=name, spec=parse_spec({"priority": priority, **spec}))


def test_equal_priority_overlap_is_a_conflict_for_both() -> None:
    found = conflicts([policy("b", 5), policy("a", 5), policy("c", 9)])
    assert [c.other for c in found["a"]] == ["b"]
    assert [c.other for c in found["b"]] == ["a"]
    assert found["c"] == []
    assert found["b"][0].winner == "a"
    assert "a" in found["b"][0].describe()
    assert "b" in found["b"][0].describe()


def test_disjoint_selectors_or_capabilities_do_not_conflict() -> None:
    web = policy("web", podSelector={"matchLabels": {"app": "web"}})
    api = policy("api", podSelector={"matchLabels": {"app": "api"}})
    labels_only = Policy(name="labels", spec=parse_spec({"nodeLabels": {"gpu": {}}}))
    assert conflicts([web, api, labels_only]) == {"web": [], "api": [], "labels": []}


def test_node_label_policies_conflict_on_node_selectors() -> None:
    def labeller(name: str, node_selector: dict[str, Any] | None) -> Policy:
        gpu: dict[str, Any] = {"nodeSelector": node_selector} if node_selector else {}
        return Policy(name=name, spec=parse_spec({"nodeLabels": {"gpu": gpu}}))

    found = conflicts([labeller("x", {"matchLabels": {"pool": "a"}}), labeller("y", None)])
    assert [c.capability for c in found["x"]] == ["nodeLabels"]
    found = conflicts(
        [
            labeller("x", {"matchLabels": {"pool": "a"}}),
            labeller("y", {"matchLabels": {"pool": "b"}}),
        ]
    )
    assert found == {"x": [], "y": []}


def test_governing_policy_prefers_priority_then_name() -> None:
    pols = [policy("zeta", 10), policy("alpha", 10), policy("low", 1)]
    match = governing_policy(pols, "deletionCost", {"app": "x"}, {})
    assert match.policy is not None
    assert match.policy.name == "alpha"
    assert match.candidates == ("alpha", "zeta", "low")
    assert "outranks zeta, low" in match.reason


def test_governing_policy_respects_namespace_and_pod_selectors() -> None:
    pol = policy(
        "p",
        namespaceSelector={"matchLabels": {"team": "a"}},
        podSelector={"matchLabels": {"app": "web"}},
    )
    assert governing_policy([pol], "deletionCost", {"app": "web"}, {"team": "a"}).policy == pol
    assert governing_policy([pol], "deletionCost", {"app": "web"}, {"team": "b"}).policy is None
    assert governing_policy([pol], "placement", {"app": "web"}, {"team": "a"}).policy is None
    none = governing_policy([pol], "deletionCost", {"app": "api"}, {"team": "a"})
    assert none.reason == "no policy with deletionCost selects this pod"


def test_higher_priority_labels_a_node_whatever_the_order_and_its_own_labels() -> None:
    def label_policy(name: str, priority: int, sources: list[str]) -> Policy:
        gpu = {"sources": sources, "nodeSelector": {"matchLabels": {"gpu": "yes"}}}
        return Policy(
            name=name, spec=parse_spec({"priority": priority, "nodeLabels": {"gpu": gpu}})
        )

    # The lower priority sorts first by name, and each policy would label differently.
    low = label_policy("a-gfd-first", 100, ["GPUFeatureDiscovery", "InstanceType"])
    high = label_policy("z-table-first", 200, ["InstanceType", "GPUFeatureDiscovery"])
    node = {"gpu": "yes"}
    for order in itertools.permutations([low, high]):
        assert governing_node_policy(order, node).policy == high
    # No flapping: the labels the winner writes do not change who wins.
    labelled = {
        **node,
        "schedpolicy.io/gpu-model": "H100",
        "schedpolicy.io/gpu-memory-mib": "81920",
    }
    assert governing_node_policy([low, high], labelled).policy == high
    assert conflicts([low, high]) == {"a-gfd-first": [], "z-table-first": []}


def test_governing_node_policy() -> None:
    pol = Policy(
        name="gpu",
        spec=parse_spec({"nodeLabels": {"gpu": {"nodeSelector": {"matchLabels": {"gpu": "yes"}}}}}),
    )
    assert governing_node_policy([pol], {"gpu": "yes"}).policy == pol
    assert governing_node_policy([pol], {}).policy is None
