"""Whether a planned cost write goes out now, later, or not at all. Pure.

The controller asks this for every pod it plans, and `explain pod` asks it with the times
it reads from managedFields, so the two cannot disagree on "pending, not before ...".
Times are seconds on any one clock: the controller's monotonic clock, or epoch seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from schedpolicy.core.deletion_cost.costs import CostPlan
from schedpolicy.core.policy.matching import Policy

Verdict = Literal["idle", "sent", "busy", "wait", "write"]


@dataclass(frozen=True)
class Gate:
    verdict: Verdict
    reason: str
    not_before: float | None = None  # for "wait": when the write may go


def min_interval(policy: Policy | None) -> float:
    """The policy's minimum time between two writes to one pod's cost."""
    if policy is None or policy.spec.deletion_cost is None:
        return 0.0
    return float(policy.spec.deletion_cost.min_update_interval_seconds)


def cost_gate(
    plan: CostPlan,
    *,
    awaiting_echo: bool,
    in_flight: bool,
    last_write: float | None,
    interval: float,
    now: float,
) -> Gate:
    """`awaiting_echo`: this very write was sent and the watch has not shown it yet.
    `in_flight`: a write to this pod is on the wire now. `last_write`: when the last
    write to this pod went out, if any."""
    if plan.action == "none":
        return Gate("idle", plan.label)
    if awaiting_echo:
        return Gate("sent", "sent; waiting for the watch to show it")
    if in_flight:
        return Gate("busy", "a write to this pod is on the wire; look again after it")
    if last_write is not None and last_write + interval > now:
        return Gate("wait", "rate-limited", not_before=last_write + interval)
    return Gate("write", plan.action)


def first_in_line(plan: CostPlan, current: str | None) -> bool:
    """Whether this write goes ahead of the re-costs (`current`: the pod's stored cost). A pod
    with no cost yet ranks at 0 beside its ReplicaSet's, the most wrong a pod can be; a
    re-cost moves a pod that is already ranked."""
    return plan.action == "write" and plan.value is not None and current is None
