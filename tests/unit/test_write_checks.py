"""The audit-log judgements the e2e aftermath and B7's whole-run audit make."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from localcluster.audit import OPERATOR_USER, AuditEvent
from localcluster.write_checks import (
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
) -> AuditEvent:
    return AuditEvent(
        user, agent, verb, resource, subresource, namespace, name, code,
        T0 + timedelta(seconds=at), request,
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


def test_writes_to_gone_objects() -> None:
    gone = {("pods", "ns/p"): T0 + timedelta(seconds=10)}
    log = [
        event(code=200, at=5),  # before it went
        event(code=404, at=12),  # refused: no such pod
        event(code=422, at=3, request=[UID]),  # a stale guard, not a gone pod
        event(code=200, at=11),  # accepted after the watch saw it go: must never happen
        event("nodes", {}, code=409, name="n", namespace=""),
        event("events", {}, verb="create", code=201),
    ]
    found = writes_to_gone(operator_attempts(log), gone)
    assert (found.attempts, found.refused_not_found, found.refused_guard) == (5, 1, 2)
    assert found.succeeded_after_gone == 1
    assert found.to_gone == 2
