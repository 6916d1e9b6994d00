"""The webhook's view: policies, namespace labels and instance types, as informers feed it."""

from __future__ import annotations

from schedpolicy.core.wellknown import INSTANCE_TYPE_LABEL
from schedpolicy.view import wire
from schedpolicy.view.placement.admission_view import AdmissionView


def policy(name: str, spec: dict[str, object]) -> wire.SchedulingPolicy:
    meta = wire.ObjectMeta(name=name, uid=f"uid-{name}", generation=1)
    return wire.SchedulingPolicy(metadata=meta, spec=spec)


def test_policies_parse_once_and_invalid_ones_place_nothing() -> None:
    view = AdmissionView()
    view.upsert_policy(policy("b", {"placement": {"avoidGPUNodes": True}}))
    bad = view.upsert_policy(policy("a", {"placement": {"avoidGPUNodes": "sometimes"}}))
    assert bad.error is not None
    assert [p.name for p in view.policies()] == ["b"]
    assert [o.name for o in view.policy_objects()] == ["a", "b"]
    view.remove_policy("b")
    assert view.policies() == []


def test_instance_types_follow_node_labels() -> None:
    view = AdmissionView()
    view.upsert_node("n1", {INSTANCE_TYPE_LABEL: "p4d.24xlarge"})
    view.upsert_node("n2", {INSTANCE_TYPE_LABEL: "g5.12xlarge"})
    view.upsert_node("n3", {"other": "x"})
    assert view.instance_types() == {"p4d.24xlarge", "g5.12xlarge"}
    view.upsert_node("n2", {INSTANCE_TYPE_LABEL: "p5.48xlarge"})
    assert view.instance_types() == {"p4d.24xlarge", "p5.48xlarge"}
    view.upsert_node("n1", {})
    assert view.instance_types() == {"p5.48xlarge"}
    view.remove_node("n2")
    assert view.instance_types() == frozenset()


def test_namespace_labels_replace_and_go() -> None:
    view = AdmissionView()
    view.upsert_namespace("shop", {"team": "a"})
    view.upsert_namespace("shop", {"team": "b"})
    assert view.namespaces == {"shop": {"team": "b"}}
    view.remove_namespace("shop")
    assert view.namespaces == {}
