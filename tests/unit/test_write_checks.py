"""The audit-log judgements the e2e aftermath and B7's whole-run audit make."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from localcluster.audit import OPERATOR_USER, AuditEvent
from localcluster.write_checks import (
    GoneWrites,
    changed_hands,
    operator_attempts,
    unowned_writes,
    writes_to_gone,
)

T0 = datetime(2026, 12, 6, tzinfo=UTC)
UID = {"op": "test", "path": "/metadata/uid", "value": "u"}
COST = "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost"
KARPENTER = "/metadata/annotations/karpenter.sh~1disruption-cost"


def event(
    resource: str = "pods",
    request: Any = None,
    *,
    verb: str = "patch",
    code: int = 200,
    user: str = OPERATOR_USER,
    name: str = "p",
    at: float = 0,
    subresource: str = "",
    namespace: str = "ns",
    agent: str = "schedpolicy/0",
    received: float | None = None,
    uid: str = "",
) -> AuditEvent:
    """`at`: when the answer was complete; `received`: when the request came (default `at`);
    `uid`: the objectRef's."""
    return AuditEvent(
        user, agent, verb, resource, subresource, namespace, name, code,
        T0 + timedelta(seconds=at), request,
        received=T0 + timedelta(seconds=at if received is None else received), uid=uid,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("e", "problem"),
    [
        (event(request=[UID, {"op": "add", "path": COST, "value": "1"}]), None),
        (event(request=[UID, {"op": "add", "path": KARPENTER, "value": "9"}]), None),
        (event(request=[UID, {"op": "remove", "path": KARPENTER}]), None),
        (event(request=[{"op": "add", "path": COST, "value": "1"}]), "no UID test"),
        (event(request=[UID, {"op": "add", "path": "/metadata/labels/x", "value": "1"}]), "add"),
        (
            event(
                request=[UID, {"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}}]
            ),
            "without a resourceVersion",
        ),
        (event(request={"metadata": {"annotations": {"x": "1"}}}), "not a JSON Patch"),
        (
            event("nodes", {"metadata": {"uid": "u", "labels": {"schedpolicy.io/gpu-model": "A"}}}),
            None,
        ),
        (event("nodes", {"metadata": {"uid": "u", "labels": {"kubernetes.io/x": "1"}}}), "label"),
        (event("nodes", {"metadata": {"labels": {"schedpolicy.io/gpu-model": "A"}}}), "no UID"),
        (event("nodes", {"metadata": {"uid": "u"}, "spec": {}}, code=200), None),
        (event("pods", None, verb="delete"), "delete pods"),
        (event("secrets", None, verb="create"), "create secrets"),
        (event("leases", None, verb="update", namespace="elsewhere"), "outside the release"),
        # A refused write changed nothing; its body is not read.
        (event(request=[{"op": "add", "path": "/spec", "value": {}}], code=422), None),
    ],
)
def test_unowned_writes(e: AuditEvent, problem: str | None) -> None:
    found = unowned_writes([e], "schedpolicy-system")
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1
        assert problem in found[0]


def test_kubectl_with_the_operators_token_is_not_the_operator() -> None:
    attempts = [event(), event(agent="kubectl/v1.37"), event(user="someone")]
    assert operator_attempts(attempts) == [attempts[0]]


def test_a_cost_that_changes_hands_twice_is_named() -> None:
    cost = [UID, {"op": "add", "path": COST, "value": "1"}]
    log = [
        event(request=cost),
        event(
            request={
                "metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "5"}}
            },
            user="karpenter",
        ),
        event(request=cost, name="other"),
        event(request=cost),
    ]
    assert changed_hands(log, ["ns"]) == {
        "ns/p controller.kubernetes.io/pod-deletion-cost": [
            "schedpolicy",
            "karpenter",
            "schedpolicy",
        ]
    }
    assert changed_hands(log[:2], ["ns"]) == {}
    assert changed_hands(log, ["elsewhere"]) == {}


# ---- writes against deletion, on the apiserver's clock alone -------------------------------
# A pod `p` (UID u) of a ReplicaSet, as B7 deletes them: the ReplicaSet controller's DELETE
# completes at 10 s (it sets the deletionTimestamp: a grace period), KWOK's own DELETE with
# grace 0 removes it at 12 s. The operator's cost patches test the UID.


def cost(uid: str = "u", value: str = "100") -> list[dict[str, str]]:
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": COST, "value": value},
    ]


def rs_delete(at: float = 10, name: str = "p") -> AuditEvent:
    return event(
        verb="delete", user=RS_CONTROLLER, agent="kube-controller-manager", at=at, name=name
    )


def kwok_delete(at: float = 12, name: str = "p") -> AuditEvent:
    return event(verb="delete", user="kwok", agent="kwok", at=at, name=name)


def evict(at: float = 10) -> AuditEvent:
    return event(
        verb="create", subresource="eviction", user="karpenter", agent="karpenter", code=201, at=at
    )


def bound(at: float, uid: str) -> AuditEvent:
    return event(verb="create", subresource="binding", user="scheduler", code=201, at=at, uid=uid)


def write(
    at: float, code: int = 200, uid: str = "u", received: float | None = None, **kw: Any
) -> AuditEvent:
    return event(request=kw.pop("request", cost(uid)), code=code, at=at, received=received, **kw)


RS_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
LABEL = [UID, {"op": "add", "path": "/metadata/labels/x", "value": "1"}]
NODE_LABEL = {"metadata": {"uid": "n1", "labels": {"schedpolicy.io/gpu-model": "A10G"}}}
UNFINALIZE = {"metadata": {"finalizers": None}}
DELETED = [rs_delete(), kwok_delete()]

# (what, the log, the UIDs a watch saw removed, the counts that are not 0)
CASES: list[tuple[str, list[AuditEvent], set[str] | None, dict[str, int]]] = [
    ("before the deletionTimestamp", [write(5), *DELETED], {"u"}, {}),
    ("after the deletionTimestamp, before removal", [*DELETED, write(11)], {"u"},
     {"accepted_while_deleting": 1}),
    ("terminating, and the write adds a label too", [*DELETED, write(11, request=LABEL)], {"u"},
     {"accepted_while_deleting": 1, "deleting_beyond_owned": 1}),
    ("after removal: not found", [*DELETED, write(13, 404)], {"u"}, {"refused_not_found": 1}),
    ("after removal: the name is another pod's", [*DELETED, write(13, 422)], {"u"},
     {"refused_guard": 1}),
    ("after removal, accepted: a real late write", [*DELETED, write(13)], {"u"},
     {"succeeded_after_gone": 1}),
    # Received before KWOK's DELETE completed: it may have landed first, as it did.
    ("overlapping the removal", [*DELETED, write(12.2, received=11.9)], {"u"},
     {"accepted_while_deleting": 1}),
    ("answered after the deletion, received before it", [*DELETED, write(10.5, received=9.5)],
     {"u"}, {}),
    # TGPS 0, as B7's pods: Karpenter's eviction removes the pod at once.
    ("evicted: accepted after it", [evict(), write(10.5)], {"u"}, {"succeeded_after_gone": 1}),
    ("evicted: refused after it", [evict(), write(10.5, 404)], {"u"}, {"refused_not_found": 1}),
    # The watch never saw it removed: terminating when the run ended.
    ("deleted, never removed", [rs_delete(), write(11), write(40)], set(),
     {"accepted_while_deleting": 2}),
    ("removed without a request the log holds", [write(5)], {"u"}, {"removal_not_logged": 1}),
    # Without the watch's word, every object whose deletion began counts as removed by its
    # last removing request.
    ("no watch", [*DELETED, write(11), write(13)], None,
     {"accepted_while_deleting": 1, "succeeded_after_gone": 1}),
    # The name comes back on a new pod (u2): its writes are judged by its own life.
    ("a reused name", [write(5), *DELETED, write(20, uid="u2"), write(21, 422),
                       rs_delete(30), kwok_delete(30.1), write(31, 404, uid="u2")], {"u", "u2"},
     {"refused_guard": 1, "refused_not_found": 1}),
    # The new pod's binding names its UID: its graceful DELETE (never completed: still
    # terminating at the end) is its own, not the first pod's, before the operator wrote it.
    ("a reused name, bound", [write(5), *DELETED, write(13, 404), bound(19, "u2"),
                              rs_delete(25), write(26, uid="u2")], {"u"},
     {"refused_not_found": 1, "accepted_while_deleting": 1}),
    # A node: Karpenter's DELETE leaves its finalizer on; its patch that drops it removes it.
    ("a node while Karpenter drains it",
     [event("nodes", NODE_LABEL, name="n", namespace="", at=5),
      event("nodes", None, verb="delete", user="karpenter", name="n", namespace="", at=10),
      event("nodes", NODE_LABEL, name="n", namespace="", at=15),
      event("nodes", UNFINALIZE, user="karpenter", name="n", namespace="", at=20),
      event("nodes", NODE_LABEL, code=404, name="n", namespace="", at=21)],
     {"n1"}, {"accepted_while_deleting": 1, "refused_not_found": 1}),
    # Other objects, other calls: not judged.
    ("not a patch of a pod or node", [*DELETED, event("events", {}, verb="create", at=13)],
     {"u"}, {}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("log", "removed", "counts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_writes_against_the_deletion_the_apiserver_recorded(
    log: list[AuditEvent], removed: set[str] | None, counts: dict[str, int]
) -> None:
    found = writes_to_gone(log, removed)
    figures = {k: v for k, v in vars(found).items() if isinstance(v, int) and k != "attempts"}
    assert {k: v for k, v in figures.items() if v} == counts
    assert found.attempts == sum(1 for e in log if e.user == OPERATOR_USER and e.verb == "patch")
    assert found.to_gone == counts.get("refused_not_found", 0) + counts.get(
        "succeeded_after_gone", 0
    )


def test_a_late_write_is_named_with_its_removal() -> None:
    found = writes_to_gone([*DELETED, write(13)], {"u"})
    assert found.examples == [
        f"{(T0 + timedelta(seconds=13)).isoformat()} 200 pods ns/p ACCEPTED after its removal"
        f" at {(T0 + timedelta(seconds=12)).isoformat()}"
    ]


def test_the_figures_are_the_dataclass_fields() -> None:
    # write_audit spreads them into B7's results; the report reads them by these names.
    assert set(vars(GoneWrites())) == {
        "attempts", "refused_not_found", "refused_guard", "succeeded_after_gone",
        "accepted_while_deleting", "deleting_beyond_owned", "removal_not_logged", "examples",
    }  # fmt: skip


def raw(verb: str, sub: str, user: str, code: int, received: str, done: str, **more: Any) -> Any:
    """An audit line as kube-apiserver 1.37 writes it (the fields AuditEvent reads)."""
    ref = {"resource": "pods", "namespace": "gone", "name": "zero-ffbd96c86-fpkvs"}
    return {
        "verb": verb,
        "user": {"username": user},
        "userAgent": more.pop("agent", "x"),
        "objectRef": {**ref, **({"subresource": sub} if sub else {}), **more.pop("ref", {})},
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": f"2026-12-07T09:28:{received}Z",
        "stageTimestamp": f"2026-12-07T09:28:{done}Z",
        **more,
    }


def test_a_replicaset_scale_down_as_a_real_log_holds_it() -> None:
    """From a local cluster (KWOK, a pod with terminationGracePeriodSeconds 0, as B7's): the
    scheduler's binding names the pod's UID; a cost patch that overlapped the ReplicaSet
    controller's DELETE landed first; that DELETE removed the pod, and KWOK's own DELETE,
    sent on seeing the deletionTimestamp, was answered 200 too (a graceless delete that loses
    the race is); the next patch found nothing."""
    uid = "9edc7a75-2d8d-4b67-9b22-616bb6a58acc"
    body = [{"op": "test", "path": "/metadata/uid", "value": uid}, {"op": "add", "path": COST}]
    me, kcm = "schedpolicy-admin", "system:kube-controller-manager"
    lines = [
        raw("create", "binding", "system:kube-scheduler", 201, "15.940973", "15.944974",
            ref={"uid": uid}),
        raw("patch", "", me, 200, "16.416765", "16.420813", requestObject=body),
        raw("patch", "", me, 200, "16.555816", "16.564321", requestObject=body),
        raw("delete", "", kcm, 200, "16.561297", "16.605630"),
        raw("delete", "", "kwok-controller", 200, "16.595425", "16.606303"),
        raw("patch", "", me, 404, "16.700048", "16.701625", requestObject=body),
    ]  # fmt: skip
    log = [AuditEvent.parse(line) for line in lines]
    assert log[0].uid == uid
    found = writes_to_gone(log, {uid}, user=me)
    assert (found.attempts, found.refused_not_found, found.succeeded_after_gone) == (3, 1, 0)
    assert found.accepted_while_deleting == 0
