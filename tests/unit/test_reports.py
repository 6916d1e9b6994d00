"""The reports the controller derives from its view: pods stuck on a policy's scheduler,
and each policy's status counts and problems."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schedpolicy.view import reports, snapshot
from schedpolicy.view.cluster import ClusterView
from schedpolicy.view.deletion_cost.decisions import PodOutcome
from tests.unit.test_cluster import pod

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}}, **spec},
    }


PLACED = policy("placed", placement={"schedulerName": "schedpolicy-scheduler"})
COSTED = policy(
    "costed",
    deletionCost={"signals": [{"type": "NodeConsolidation", "nodeConsolidation": {"points": 400}}]},
)


def waiting(
    name: str, age_s: float, scheduler: str = "schedpolicy-scheduler", looked: bool = False
) -> dict[str, Any]:
    body = pod(name, f"u-{name}", node=None, phase="Pending")
    body["metadata"]["creationTimestamp"] = (NOW - timedelta(seconds=age_s)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    body["metadata"]["labels"] = {"app": "web"}
    body["spec"]["schedulerName"] = scheduler
    if looked:
        body["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    return body


def governed(view: ClusterView, *names: str) -> dict[str, PodOutcome]:
    return {uid: PodOutcome(frozenset(names), None, None, None) for uid in view.pods}


@pytest.mark.parametrize(
    ("pods", "stuck", "waiting_count"),
    [
        ([], {}, 0),
        # Younger than the threshold: not reported yet.
        ([waiting("young", 30)], {}, 0),
        ([waiting("never", 90)], {"SchedulerNotScheduling": ["ns/never"]}, 1),
        ([waiting("full", 90, looked=True)], {"PodsUnschedulable": ["ns/full"]}, 1),
        # Another scheduler's pods are not ours to report.
        ([waiting("other", 90, scheduler="default-scheduler")], {}, 0),
        (
            [waiting("a", 90), waiting("b", 90, looked=True)],
            {"SchedulerNotScheduling": ["ns/a"], "PodsUnschedulable": ["ns/b"]},
            2,
        ),
    ],
    ids=["none", "young", "never-looked-at", "no-room", "other-scheduler", "both"],
)
def test_pending_report(
    pods: list[dict[str, Any]], stuck: dict[str, list[str]], waiting_count: int
) -> None:
    view = snapshot.build_view(policies=[PLACED], pods=pods)
    report = reports.pending_report(view, governed(view, "placed"), NOW, threshold=60)
    assert report.waiting["schedpolicy-scheduler"] == waiting_count
    assert report.schedulers == {"schedpolicy-scheduler"}
    got = report.stuck.get("placed", [])
    assert [reason for reason, _ in got] == list(stuck)  # SchedulerNotScheduling first
    for (_, message), names in zip(got, stuck.values(), strict=True):
        assert all(n in message for n in names)


@pytest.mark.parametrize(
    ("found", "reasons"),
    [
        (reports.Findings(), []),
        (
            reports.Findings(cost_failures={"u-a": ("costed", "403 Forbidden")}),
            ["CostWriteFailed"],
        ),
        # A failure for a pod no policy governs any more shows nowhere.
        (reports.Findings(cost_failures={"u-a": (None, "403 Forbidden")}), []),
        (
            reports.Findings(
                cost_failures={"u-a": ("costed", "403 Forbidden")},
                other_installs=("ns-b/schedpolicy",),
                label_conflicts={"costed": ["node n1: x"]},
            ),
            ["AnotherInstance", "CostWriteFailed", "LabelConflict"],
        ),
        (
            reports.Findings(label_failures={"n1": ("costed", "403 Forbidden: denied")}),
            ["LabelWriteFailed"],
        ),
    ],
    ids=["clean", "cost-failure", "orphan-failure", "another-install-first", "label-failure"],
)
def test_status_problems(found: reports.Findings, reasons: list[str]) -> None:
    view = snapshot.build_view(policies=[COSTED], pods=[waiting("a", 0)])
    report = reports.status_report(view, governed(view, "costed"), found)
    assert [r for r, _ in report.problems.get("costed", [])] == reasons
    counts = report.counts["costed"]
    assert (counts.matched_pods, counts.costed_pods, counts.labeled_nodes) == (1, 0, None)


def test_a_status_shows_five_problems_and_counts_the_rest() -> None:
    view = snapshot.build_view(policies=[COSTED])
    failures = {f"u{i}": ("costed", "500") for i in range(8)}
    report = reports.status_report(view, {}, reports.Findings(cost_failures=failures))
    (observed,) = reports.observations(list(view.policy_objects()), report, view.policies())
    assert len(observed.degraded) == 6
    assert observed.degraded[-1] == "and 3 more problems"
    assert observed.degraded_reason == "CostWriteFailed"


LABELLER = {
    "metadata": {"name": "labeller", "uid": "uid-labeller", "generation": 1},
    "spec": {"nodeLabels": {"gpu": {"labelPrefix": "gpus.example.com"}}},
}


@pytest.mark.parametrize(
    ("admitted", "reasons"),
    [
        # Not told the guard's prefixes: the apiserver judges each write.
        (None, []),
        (frozenset({"gpus.example.com", "schedpolicy.io"}), []),
        (frozenset({"schedpolicy.io"}), ["LabelPrefixNotAdmitted"]),
        # The guard matches `<prefix>/`, so a parent domain admits nothing below it.
        (frozenset({"example.com"}), ["LabelPrefixNotAdmitted"]),
    ],
    ids=["not-told", "listed", "unlisted", "parent-domain"],
)
def test_a_labelling_policy_outside_the_guard_is_degraded_before_any_write(
    admitted: frozenset[str] | None, reasons: list[str]
) -> None:
    view = snapshot.build_view(policies=[LABELLER, COSTED])
    report = reports.status_report(view, {}, reports.Findings(admitted_prefixes=admitted))
    assert [r for r, _ in report.problems.get("labeller", [])] == reasons
    assert report.problems.get("costed", []) == []  # it labels nothing
    for _, message in report.problems.get("labeller", []):
        assert "gpus.example.com" in message
        assert "security.admissionGuard.nodeLabelPrefixes" in message
