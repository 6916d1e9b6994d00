"""The status a SchedulingPolicy should show. Pure.

Conditions follow Kubernetes conventions: `lastTransitionTime` moves only when a
condition's status changes, every condition carries the generation it was
computed for, and a status is written only when something other than
timestamps differs, so an idle operator makes no writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schedpolicy.core.api import ConditionType, SpecError
from schedpolicy.core.deletion_cost.karpenter_gate import GateYield
from schedpolicy.core.placement.gpu_offers import GPUSupply
from schedpolicy.core.placement.routing import Route
from schedpolicy.core.policy.matching import Conflict
from schedpolicy.core.wording import count, verb


@dataclass(frozen=True)
class Counts:
    """What the reconcilers observed for one policy; None means not applicable or not known."""

    matched_pods: int | None = None
    costed_pods: int | None = None
    labeled_nodes: int | None = None


@dataclass(frozen=True)
class Observation:
    name: str
    generation: int
    spec_error: SpecError | None = None
    conflicts: Sequence[Conflict] = ()
    degraded: Sequence[str] = ()  # human-readable problems, e.g. pods stuck on our scheduler
    degraded_reason: str = "Degraded"
    counts: Counts = field(default_factory=Counts)
    # Field manager -> pods whose pod-deletion-cost it owns, where this policy would write
    # and does not take over (read from managedFields).
    foreign_writers: Mapping[str, int] = field(default_factory=dict)
    # Placement policies: the admission path that serves the hints (None: not placement,
    # or not decided yet).
    admission: Route | None = None
    # placement.gpu policies: what can take their GPU pods.
    gpu_supply: GPUSupply | None = None
    # deletionCost policies, once Karpenter's deletion-cost gate is seen: what they leave to it.
    karpenter_gate: GateYield | None = None


def foreign_message(writers: Mapping[str, int]) -> str:
    """Who else writes the deletion cost on this policy's pods, most pods first."""
    ranked = sorted(writers.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{count(n, 'pod')} by {manager}" for manager, n in ranked]
    total = sum(writers.values())
    return (
        f"pod-deletion-cost on {count(total, 'pod')} {verb(total, 'is', 'are')} managed by"
        f" another writer ({', '.join(parts)}; from managedFields); takeOver is false, so"
        f" {verb(total, 'it keeps', 'they keep')} that value and this policy writes nothing there"
    )


@dataclass(frozen=True)
class Verdict:
    type: ConditionType
    status: str
    reason: str
    message: str


def verdicts(obs: Observation) -> list[Verdict]:
    if obs.spec_error is not None:
        ready = Verdict(
            "Ready",
            "False",
            "InvalidSpec",
            "the spec is invalid and is ignored: " + "; ".join(obs.spec_error.problems),
        )
    else:
        ready = Verdict("Ready", "True", "Reconciled", f"generation {obs.generation} is in effect")
    if obs.conflicts or obs.foreign_writers:
        messages = [c.describe() for c in obs.conflicts]
        if obs.foreign_writers:
            messages.append(foreign_message(obs.foreign_writers))
        conflicting = Verdict(
            "Conflicting",
            "True",
            "EqualPriorityOverlap" if obs.conflicts else "ForeignCostWriter",
            "; ".join(messages),
        )
    else:
        conflicting = Verdict(
            "Conflicting", "False", "NoConflict", "no overlapping policy has equal priority"
        )
    if obs.degraded:
        degraded = Verdict("Degraded", "True", obs.degraded_reason, "; ".join(obs.degraded))
    else:
        degraded = Verdict("Degraded", "False", "AsExpected", "")
    out = [ready, conflicting, degraded]
    if obs.admission is not None and obs.spec_error is None:
        route = obs.admission
        out.append(Verdict("Compiled", str(route.compiled), route.reason, route.message))
    if obs.gpu_supply is not None and obs.spec_error is None:
        out.append(Verdict("Provisionable", *obs.gpu_supply.condition()))
    if obs.karpenter_gate is not None and obs.spec_error is None:
        out.append(Verdict("Yielding", *obs.karpenter_gate.condition()))
    return out


def desired_status(obs: Observation, current: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """The full status to store, keeping transition times of unchanged conditions."""
    previous = {c.get("type"): c for c in (current or {}).get("conditions", []) or []}
    conditions = []
    for v in verdicts(obs):
        old = previous.get(v.type)
        since = old["lastTransitionTime"] if old and old.get("status") == v.status else now
        conditions.append(
            {
                "type": v.type,
                "status": v.status,
                "reason": v.reason,
                "message": v.message,
                "lastTransitionTime": since,
                "observedGeneration": obs.generation,
            }
        )
    status: dict[str, Any] = {"observedGeneration": obs.generation, "conditions": conditions}
    for key, value in (
        ("matchedPods", obs.counts.matched_pods),
        ("costedPods", obs.counts.costed_pods),
        ("labeledNodes", obs.counts.labeled_nodes),
    ):
        if value is not None:
            status[key] = value
    status["summary"] = summary(obs.counts, conditions)
    if obs.admission is not None and obs.spec_error is None:
        route = obs.admission
        status["admission"] = {"path": route.path, "reason": route.reason}
        if route.object is not None:
            status["admission"]["policyObject"] = route.object
    status["lastReconcileTime"] = now
    return status


_HEALTHY = {"Ready": "True", "Conflicting": "False", "Degraded": "False", "Provisionable": "True"}
# Compiled=False is a choice (webhook mode, an older apiserver) unless one of these says
# the compiled policy did not make it into the apiserver.
PROBLEM_REASONS = frozenset({"Rejected"})


def is_problem(condition: Mapping[str, Any]) -> bool:
    if condition.get("type") == "Compiled":
        return condition.get("reason") in PROBLEM_REASONS
    if condition.get("type") == "Yielding":  # leaving a field to its other writer, by design
        return False
    return _HEALTHY.get(condition.get("type", "")) != condition.get("status")


def summary(counts: Counts, conditions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """What `kubectl get spol` shows: `-` for a count that does not apply to this policy,
    and the reason of the first condition that is not as it should be (or, with none, why
    pods of Karpenter nodes are not costed: Yielding is no problem, but it is news)."""

    def text(value: int | None) -> str:
        return "-" if value is None else str(value)

    problem = next((c for c in conditions if is_problem(c)), None) or next(
        (c for c in conditions if c.get("type") == "Yielding" and c.get("status") == "True"),
        None,
    )
    return {
        "matched": text(counts.matched_pods),
        "costed": text(counts.costed_pods),
        "nodes": text(counts.labeled_nodes),
        "reason": problem["reason"] if problem else "-",
    }


def _material(status: Mapping[str, Any] | None) -> dict[str, Any]:
    body = {k: v for k, v in (status or {}).items() if k != "lastReconcileTime"}
    body["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in body.get("conditions", []) or []
    ]
    return body


def needs_write(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    return _material(current) != _material(desired)


def transitions(
    current: Mapping[str, Any] | None, desired: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Conditions whose status or reason changed: these, and only these, deserve an Event."""
    before = {c.get("type"): c for c in (current or {}).get("conditions", []) or []}
    return [
        c
        for c in desired.get("conditions", [])
        if (old := before.get(c["type"])) is None
        or (old.get("status"), old.get("reason")) != (c["status"], c["reason"])
    ]
