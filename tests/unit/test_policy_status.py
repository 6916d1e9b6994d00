from __future__ import annotations

from typing import Any

import pytest

from schedpolicy.core.api import SpecError
from schedpolicy.core.policy.matching import Conflict
from schedpolicy.core.policy.status import (
    Counts,
    Observation,
    desired_status,
    needs_write,
    transitions,
)

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def by_type(status: dict[str, Any]) -> dict[str, Any]:
    return {c["type"]: c for c in status["conditions"]}


def test_healthy_policy() -> None:
    status = desired_status(Observation("p", 3, counts=Counts(matched_pods=4)), None, T0)
    conds = by_type(status)
    assert status["observedGeneration"] == 3
    assert status["matchedPods"] == 4
    assert "costedPods" not in status
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("True", "Reconciled")
    assert conds["Conflicting"]["status"] == "False"
    assert conds["Degraded"]["status"] == "False"
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])


def test_invalid_spec_is_not_ready_and_says_why() -> None:
    err = SpecError(["spec.deletionCost.min: min must be less than or equal to max"])
    ready = by_type(desired_status(Observation("p", 1, spec_error=err), None, T0))["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.deletionCost.min" in ready["message"]


def test_conflict_and_degraded() -> None:
    obs = Observation(
        "b",
        1,
        conflicts=[Conflict("deletionCost", "b", "a", 5)],
        degraded=["3 pods pending on schedpolicy-scheduler for over 60s"],
        degraded_reason="SchedulerNotScheduling",
    )
    conds = by_type(desired_status(obs, None, T0))
    assert conds["Conflicting"]["reason"] == "EqualPriorityOverlap"
    assert "a" in conds["Conflicting"]["message"]
    assert "b" in conds["Conflicting"]["message"]
    assert (conds["Degraded"]["status"], conds["Degraded"]["reason"]) == (
        "True",
        "SchedulerNotScheduling",
    )


def test_transition_time_moves_only_when_status_changes() -> None:
    first = desired_status(Observation("p", 1), None, T0)
    same = desired_status(Observation("p", 2), first, T1)
    assert by_type(same)["Ready"]["lastTransitionTime"] == T0
    flipped = desired_status(Observation("p", 2, spec_error=SpecError(["spec: x"])), first, T1)
    assert by_type(flipped)["Ready"]["lastTransitionTime"] == T1
    assert by_type(flipped)["Conflicting"]["lastTransitionTime"] == T0


def test_no_write_when_only_timestamps_differ() -> None:
    first = desired_status(Observation("p", 1), None, T0)
    again = desired_status(Observation("p", 1), first, T1)
    assert not needs_write(first, again)
    assert needs_write(first, desired_status(Observation("p", 2), first, T1))
    assert needs_write(
        first, desired_status(Observation("p", 1, counts=Counts(costed_pods=1)), first, T1)
    )
    assert needs_write(None, first)


def test_transitions_name_changed_conditions() -> None:
    first = desired_status(Observation("p", 1), None, T0)
    assert {c["type"] for c in transitions(None, first)} == {"Ready", "Conflicting", "Degraded"}
    conflicted = desired_status(
        Observation("p", 1, conflicts=[Conflict("placement", "p", "q", 0)]), first, T1
    )
    assert [c["type"] for c in transitions(first, conflicted)] == ["Conflicting"]
    assert transitions(first, desired_status(Observation("p", 2), first, T1)) == []


@pytest.mark.parametrize(
    ("counts", "shown"),
    [
        (Counts(matched_pods=4, costed_pods=3), ("4", "3", "-")),  # a cost policy: no nodes
        (Counts(labeled_nodes=2), ("-", "-", "2")),  # labels only: no pods
        (Counts(matched_pods=0, labeled_nodes=0), ("0", "-", "0")),  # zero is not "-"
    ],
)
def test_kubectl_shows_a_dash_for_what_does_not_apply(
    counts: Counts, shown: tuple[str, str, str]
) -> None:
    summary = desired_status(Observation("p", 1, counts=counts), None, T0)["summary"]
    assert (summary["matched"], summary["costed"], summary["nodes"]) == shown
    assert summary["reason"] == "-"


def test_the_reason_column_names_the_first_problem() -> None:
    err = SpecError(["spec.deletionCost.min: min must be less than or equal to max"])
    invalid = desired_status(Observation("p", 1, spec_error=err), None, T0)
    assert invalid["summary"]["reason"] == "InvalidSpec"
    another = Observation("p", 1, degraded=["x"], degraded_reason="AnotherInstance")
    assert desired_status(another, None, T0)["summary"]["reason"] == "AnotherInstance"
