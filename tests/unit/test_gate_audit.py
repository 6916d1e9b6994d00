"""The gate write-war test's audit figures: who wrote and who deleted pod-deletion-cost, read
from the request bodies as the apiserver's audit log keeps them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from localcluster.audit import OPERATOR_USER, AuditEvent
from tests.e2e.karpenter.gate_audit import actions, figures

T0 = datetime(2026, 12, 7, tzinfo=UTC)
KEY = "controller.kubernetes.io/pod-deletion-cost"
POINTER = "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost"
UID = {"op": "test", "path": "/metadata/uid", "value": "u"}
STEER = "/metadata/annotations/karpenter.sh~1disruption-cost"


def ours(value: str) -> list[dict[str, Any]]:
    return [UID, {"op": "add", "path": POINTER, "value": value}]


def gate(value: str | None) -> dict[str, Any]:
    """Karpenter's merge patch, with its optimistic lock."""
    return {"metadata": {"annotations": {KEY: value}, "resourceVersion": "7"}}


def event(request: Any, user: str = OPERATOR_USER, name: str = "p", at: int = 0) -> AuditEvent:
    return AuditEvent(
        user, "x/1", "patch", "pods", "", "ns", name, 200, T0 + timedelta(seconds=at), request
    )


@pytest.mark.parametrize(
    ("request_body", "before", "found"),
    [
        (ours("-500"), None, [("write", "-500")]),
        ([UID, {"op": "remove", "path": POINTER}], "-500", [("delete", None)]),
        (
            [UID, {"op": "add", "path": "/metadata/annotations", "value": {KEY: "1"}}],
            None,
            [("write", "1")],
        ),
        (gate("-3"), "-500", [("write", "-3")]),
        (gate(None), "-3", [("delete", None)]),  # null in a merge patch deletes the key
        ({"metadata": {"annotations": {"other": "x"}}}, "-3", []),
        ({"metadata": {"annotations": None}}, "-3", [("delete", None)]),
        ([UID, {"op": "add", "path": STEER, "value": "9"}], None, []),
        (
            {"kind": "Pod", "spec": {}, "metadata": {"annotations": {}}},
            "-3",
            [("delete", None)],
        ),
        ({"kind": "Pod", "spec": {}, "metadata": {"annotations": {KEY: "-3"}}}, "-3", []),
    ],
    ids=[
        "our-add",
        "our-remove",
        "our-whole-map",
        "gate-write",
        "gate-delete",
        "other-key",
        "all-annotations-gone",
        "disruption-cost-only",
        "update-without-it",
        "update-unchanged",
    ],
)  # fmt: skip
def test_actions(
    request_body: Any, before: str | None, found: list[tuple[str, str | None]]
) -> None:
    assert actions(request_body, KEY, before) == found


def test_a_write_war_is_counted_and_a_yield_is_not() -> None:
    log = [
        # war: we write, the gate deletes, we write again, it deletes again, we write again
        event(ours("-500"), name="war"),
        event(gate(None), "karpenter", "war", 60),
        event(ours("-500"), name="war", at=61),
        event(gate(None), "karpenter", "war", 120),
        event(ours("-500"), name="war", at=121),
        # yield: we write before the gate is seen, the gate deletes, and that is all
        event(ours("-500"), name="yield"),
        event(gate(None), "karpenter", "yield", 60),
        # ranked: the gate overwrites ours, then re-ranks and later deletes its own
        event(ours("-500"), name="ranked"),
        event(gate("-3"), "karpenter", "ranked", 60),
        event(gate("-2"), "karpenter", "ranked", 120),
        event(gate(None), "karpenter", "ranked", 180),
        event(gate("-1"), "karpenter", "ranked", 240),
    ]
    found = figures(log, "ns")
    assert found.writes == {"schedpolicy": 5, "karpenter": 3}
    assert found.deletions == {"karpenter": 4}
    assert set(found.changed_hands_twice()) == {"war"}
    assert found.changed_hands_twice()["war"][:2] == ["schedpolicy write -500", "karpenter delete"]
    assert found.rewritten_after_deletion() == {"war": (2, 0)}
    assert found.pods["ranked"].rewrites_after_deletion() == (0, 1)
    assert found.pods["yield"].hand_changes == 1
    assert "hand changes: 6 in all, at most 4 on one pod" in found.lines()
    assert figures(log, "ns", since=T0 + timedelta(seconds=100)).writes == {
        "schedpolicy": 1,
        "karpenter": 2,
    }
