from __future__ import annotations

from typing import Any

import pytest

from schedpolicy.core.deletion_cost.patches import cost_patch
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.view.cluster import ClusterView, annotation_managers, node_record, pod_record


def pod(
    name: str,
    uid: str,
    node: str | None = "n1",
    cpu: str = "500m",
    rs: str | None = "rs1",
    phase: str = "Running",
    **meta: Any,
) -> dict[str, Any]:
    owners = [{"kind": "ReplicaSet", "name": "web-1", "uid": rs, "controller": True}] if rs else []
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "ownerReferences": owners,
            **meta,
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    }


def node(name: str, zone: str, ready: bool = True, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_pod_record_reads_what_the_signals_need() -> None:
    raw = pod("a", "u1", cpu="250m", annotations={COST_ANNOTATION: "100"})
    raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    record = pod_record(raw)
    assert (record.requests["cpu"], record.replicaset_uid, record.cost) == (250, "rs1", "100")
    assert record.conditions == {"Ready": "True"}
    assert record.counts_toward_fill


def test_managed_fields_tell_who_owns_the_cost() -> None:
    fields = [
        {
            "manager": "schedpolicy",
            "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{COST_ANNOTATION}": {}}}},
        },
        {"manager": "kubectl", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}},
    ]
    assert annotation_managers(fields, COST_ANNOTATION) == {"schedpolicy"}
    assert annotation_managers([], COST_ANNOTATION) == frozenset()


def test_node_fill_follows_pods() -> None:
    view = ClusterView()
    view.upsert_node(node("n1", "a"))
    _, affected = view.upsert_pod(pod("a", "u1"))
    assert affected.nodes == {"n1"}
    assert affected.replicasets == {"rs1"}
    view.upsert_pod(pod("b", "u2", cpu="1"))
    assert view.requested("n1").get("cpu", 0) == 1500
    # A finished pod no longer fills its node.
    _, affected = view.upsert_pod(pod("b", "u2", cpu="1", phase="Succeeded"))
    assert view.requested("n1").get("cpu", 0) == 500
    assert affected.nodes == {"n1"}
    # A status-only change of a running pod touches nothing else.
    _, affected = view.upsert_pod(pod("a", "u1"))
    assert (affected.nodes, affected.replicasets) == (set(), set())
    view.remove_pod("u1")
    assert view.requested("n1").get("cpu", 0) == 0
    assert view.pods_on_node("n1") == {"u2"}


def test_daemonset_pods_do_not_count_toward_fill() -> None:
    view = ClusterView()
    raw = pod("ds", "u9")
    raw["metadata"]["ownerReferences"] = [
        {"kind": "DaemonSet", "name": "d", "uid": "d1", "controller": True}
    ]
    view.upsert_pod(raw)
    assert view.requested("n1").get("cpu", 0) == 0


def test_recreated_name_replaces_the_old_uid() -> None:
    view = ClusterView()
    view.upsert_pod(pod("a", "old"))
    _, affected = view.upsert_pod(pod("a", "new"))
    assert set(view.pods) == {"new"}
    assert view.pod("ns", "a").uid == "new"
    assert "old" not in view.pods_in_replicaset("rs1")
    assert affected.pods == {"new"}


def test_zone_counts_and_eligible_zones() -> None:
    view = ClusterView()
    for name, zone, ready in (("n1", "a", True), ("n2", "b", True), ("n3", "c", False)):
        view.upsert_node(node(name, zone, ready))
    view.upsert_pod(pod("p1", "u1", node="n1"))
    view.upsert_pod(pod("p2", "u2", node="n1"))
    view.upsert_pod(pod("p3", "u3", node="n3"))
    view.upsert_pod(pod("p4", "u4", node=None))
    assert view.eligible_zones() == {"a", "b"}
    assert view.zone_counts("rs1") == {"a": 2, "b": 0, "c": 1}


def test_node_changes_that_matter() -> None:
    view = ClusterView()
    _, first = view.upsert_node(node("n1", "a"))
    assert first.all_pods  # a new eligible zone
    _, same = view.upsert_node(node("n1", "a"))
    assert not same.nodes
    assert not same.all_pods
    _, unready = view.upsert_node(node("n1", "a", ready=False))
    assert unready.all_pods
    assert node_record(node("n1", "a")).allocatable_gpus == 8


@pytest.mark.parametrize(
    ("change", "leaving"),
    [
        ({}, False),
        ({"spec": {"taints": [{"key": "karpenter.sh/disruption", "effect": "NoSchedule"}]}}, True),
        (
            {
                "spec": {
                    "taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]
                }
            },
            True,
        ),
        # The cluster autoscaler's soft mark says "maybe later", not "now".
        (
            {
                "spec": {
                    "taints": [
                        {
                            "key": "DeletionCandidateOfClusterAutoscaler",
                            "effect": "PreferNoSchedule",
                        }
                    ]
                }
            },
            False,
        ),
        ({"metadata": {"name": "n1", "deletionTimestamp": "2026-12-06T00:00:00Z"}}, True),
    ],
)
def test_a_node_being_drained_or_deleted_is_leaving_and_its_pods_are_looked_at(
    change: dict[str, Any], leaving: bool
) -> None:
    view = ClusterView()
    view.upsert_node(node("n1", "a"))
    record, affected = view.upsert_node({**node("n1", "a"), **change})
    assert record.leaving is leaving
    assert bool(affected.nodes) is leaving


def test_only_a_change_of_eligible_zones_touches_every_pod() -> None:
    view = ClusterView()
    view.upsert_node(node("n1", "a"))
    view.upsert_node(node("n2", "b"))
    view.upsert_pod(pod("p1", "u1", node="n1"))
    assert view.zone_counts("rs1") == {"a": 1, "b": 0}

    # Another node in a zone that is already eligible: no pod's zone or zones change.
    _, more = view.upsert_node(node("n3", "a"))
    assert (more.all_pods, more.replicasets) == (False, set())
    # One of two nodes in zone a goes NotReady, then away: zone a stays eligible.
    _, unready = view.upsert_node(node("n3", "a", ready=False))
    assert not unready.all_pods
    assert not view.remove_node("n3").all_pods
    # The last node of zone b goes: the eligible zones change, so every pod is looked at.
    gone = view.remove_node("n2")
    assert gone.all_pods
    assert view.eligible_zones() == {"a"}
    assert view.zone_counts("rs1") == {"a": 1}
    # A node relabelled into another zone moves its pods: their ReplicaSet's spread changes.
    view.upsert_node(node("n4", "a"))
    _, moved = view.upsert_node(node("n1", "c"))
    assert moved.all_pods  # zone c is new
    _, back = view.upsert_node(node("n1", "a"))
    assert back.all_pods  # and gone again
    view.upsert_node(node("n5", "c"))
    _, again = view.upsert_node(node("n1", "c"))
    assert (again.all_pods, again.replicasets) == (False, {"rs1"})
    assert view.zone_counts("rs1") == {"a": 0, "c": 1}
    assert view.eligible_nodes_by_zone == {"a": {"n4"}, "c": {"n1", "n5"}}


def test_zone_ranks_follow_pod_age() -> None:
    view = ClusterView()
    view.upsert_node(node("n1", "a"))
    view.upsert_node(node("n2", "b"))
    for i, created in enumerate(
        ["2026-01-01T00:00:03Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]
    ):
        view.upsert_pod(pod(f"p{i}", f"u{i}", node="n1", creationTimestamp=created))
    spread = view.zone_spread("rs1")
    assert dict(spread.counts) == {"a": 3, "b": 0}
    assert dict(spread.ranks) == {"u1": 0, "u2": 1, "u0": 2}
    # A pod leaving invalidates the cached spread.
    view.remove_pod("u1")
    assert dict(view.zone_spread("rs1").ranks) == {"u2": 0, "u0": 1}


def test_unbound_pods_are_indexed_until_bound_or_gone() -> None:
    view = ClusterView()
    view.upsert_pod(pod("a", "u1", node=None))
    view.upsert_pod(pod("b", "u2", node=None))
    view.upsert_pod(pod("c", "u3", node="n1"))
    assert view.unbound_pods() == {"u1", "u2"}
    view.upsert_pod(pod("a", "u1", node="n1"))  # bound by the scheduler
    view.remove_pod("u2")
    assert view.unbound_pods() == set()
    view.upsert_pod(pod("d", "u4", node=None))
    view.upsert_pod(pod("d", "u5", node=None))  # same name, new UID: the old one is gone
    assert view.unbound_pods() == {"u5"}


def typed(name: str, instance_type: str | None) -> dict[str, Any]:
    raw = node(name, "z1")
    if instance_type is not None:
        raw["metadata"]["labels"]["node.kubernetes.io/instance-type"] = instance_type
    return raw


def test_instance_types_follow_nodes_coming_changing_and_going() -> None:
    view = ClusterView()
    view.upsert_node(typed("n1", "m5.large"))
    view.upsert_node(typed("n2", "p4d.24xlarge"))
    view.upsert_node(typed("n3", None))
    assert view.instance_types() == {"m5.large", "p4d.24xlarge"}
    view.upsert_node(typed("n1", "c5.xlarge"))
    assert view.instance_types() == {"c5.xlarge", "p4d.24xlarge"}
    view.remove_node("n2")
    assert view.instance_types() == {"c5.xlarge"}
    view.upsert_node(typed("n3", "g5.xlarge"))
    assert view.instance_types() == {"c5.xlarge", "g5.xlarge"}


@pytest.mark.parametrize(
    ("annotations", "kept", "has_map"),
    [
        (None, {}, False),
        ({}, {}, False),
        # The big annotation is left out of the record, but the map is still there.
        ({"kubectl.kubernetes.io/last-applied-configuration": "{}"}, {}, True),
        ({"a": "1"}, {"a": "1"}, True),
    ],
)
def test_pod_record_knows_whether_an_annotations_map_exists(
    annotations: dict[str, str] | None, kept: dict[str, str], has_map: bool
) -> None:
    record = pod_record(pod("p", "u1", annotations=annotations, resourceVersion="7"))
    assert (dict(record.annotations), record.has_annotations) == (kept, has_map)


def test_cost_patch_adds_one_key_to_an_existing_map() -> None:
    assert cost_patch("u1", "-5", has_annotations=True, resource_version="7") == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {
            "op": "add",
            "path": "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost",
            "value": "-5",
        },
    ]


def test_cost_patch_adds_the_whole_map_only_to_the_version_it_saw() -> None:
    # Adding the whole map replaces it; the version test keeps that from wiping an
    # annotation someone added after our watch event.
    assert cost_patch("u1", "-5", has_annotations=False, resource_version="7") == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/metadata/annotations", "value": {COST_ANNOTATION: "-5"}},
    ]
