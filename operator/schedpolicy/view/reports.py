"""What the controller reports about its policies, from the view and its last plans. Pure.

Two reports: the pods a policy handed to its scheduler that are still waiting, and each
policy's status counts and problems. The reconciler decides when to make them and the
status writer writes them; neither decides what they say.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from schedpolicy.core import timestamps
from schedpolicy.core.deletion_cost.karpenter_gate import GateYield
from schedpolicy.core.gpu import label_rules as gpu
from schedpolicy.core.placement import gpu_offers, hints
from schedpolicy.core.placement.routing import Route
from schedpolicy.core.policy import matching
from schedpolicy.core.policy.status import Counts, Observation
from schedpolicy.core.wellknown import FIELD_MANAGER
from schedpolicy.core.wording import count, pending_message
from schedpolicy.view.cluster import ClusterView, PolicyObject
from schedpolicy.view.deletion_cost.decisions import PodOutcome

Problem = tuple[str, str]  # (reason, message)
# The most problems a status lists; the rest are counted.
SHOWN_PROBLEMS = 5


@dataclass(frozen=True)
class Pending:
    waiting: Counter[str]  # scheduler name -> pods waiting on it past the threshold
    schedulers: frozenset[str]  # every scheduler a placement policy names
    stuck: dict[str, list[Problem]]  # policy -> problems, most telling first


def pending_report(
    view: ClusterView, outcomes: Mapping[str, PodOutcome], now: datetime, threshold: float
) -> Pending:
    """Pods a policy handed to its scheduler that are still unscheduled after `threshold`.

    A pod the scheduler looked at carries PodScheduled=False (no room); a pod with no
    PodScheduled condition at all was never looked at, which is what a dead secondary
    scheduler looks like.
    """
    placements = {p.name: p.spec.placement for p in view.policies() if p.spec.placement}
    schedulers = frozenset(p.scheduler_name for p in placements.values())
    waiting: Counter[str] = Counter()
    by_policy: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for uid in view.unbound_pods():
        pod, outcome = view.pods.get(uid), outcomes.get(uid)
        if pod is None or outcome is None or not pod.active:
            continue
        if pod.scheduler_name not in schedulers:
            continue
        if (timestamps.seconds_since(pod.created, now) or 0.0) < threshold:
            continue
        waiting[pod.scheduler_name] += 1
        for name in outcome.governed_by:
            placement = placements.get(name)
            if placement is not None and placement.scheduler_name == pod.scheduler_name:
                seen = "PodScheduled" in pod.conditions
                reason = "PodsUnschedulable" if seen else "SchedulerNotScheduling"
                by_policy[name][reason].append(f"{pod.namespace}/{pod.name}")
    stuck = {
        name: [
            (reason, pending_message(reason, pods, placements[name].scheduler_name, int(threshold)))
            for reason, pods in sorted(reasons.items(), reverse=True)
        ]
        for name, reasons in by_policy.items()
    }
    return Pending(waiting, schedulers, stuck)


@dataclass(frozen=True)
class Findings:
    """What the writers ran into, for the status: besides the plans themselves."""

    cost_failures: Mapping[str, tuple[str | None, str]] = field(default_factory=dict)
    stuck: Mapping[str, list[Problem]] = field(default_factory=dict)
    other_installs: tuple[str, ...] = ()
    labeled: Mapping[str, int] = field(default_factory=dict)  # policy -> nodes labelled
    label_conflicts: Mapping[str, list[str]] = field(default_factory=dict)
    # node -> (the policy governing it, why its last label write was refused)
    label_failures: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # The admission guard's node label prefixes, when the controller was told them.
    admitted_prefixes: frozenset[str] | None = None


@dataclass(frozen=True)
class StatusReport:
    counts: dict[str, Counts]
    problems: dict[str, list[Problem]]
    cost_bands: Counter[str]  # cost value -> pods carrying it as written by us
    # policy -> field manager -> pods whose cost that manager owns and the policy leaves alone
    foreign: dict[str, Counter[str]] = field(default_factory=dict)
    # policy with placement.gpu -> what can take its GPU pods
    gpu_supply: dict[str, gpu_offers.GPUSupply] = field(default_factory=dict)
    # policy with deletionCost -> what it leaves to Karpenter's deletion-cost gate, once seen
    gate: dict[str, GateYield] = field(default_factory=dict)


def status_report(
    view: ClusterView, outcomes: Mapping[str, PodOutcome], found: Findings
) -> StatusReport:
    """Per policy: the status counts, and the problems to show, most serious first."""
    matched: Counter[str] = Counter()
    costed: Counter[str] = Counter()
    bands: Counter[str] = Counter()
    for uid, outcome in outcomes.items():
        pod = view.pods.get(uid)
        if pod is None:
            continue
        for name in outcome.governed_by:
            matched[name] += 1
        final = outcome.final
        if outcome.cost_policy and final is not None and pod.cost == str(final):
            costed[outcome.cost_policy] += 1

        if pod.cost is not None and FIELD_MANAGER in pod.cost_managers:
            bands[pod.cost] += 1
    problems = _problems(view, found)
    counts = {}
    for policy in view.policies():
        has_pods = policy.has("deletionCost") or policy.has("placement")
        counts[policy.name] = Counts(
            matched_pods=matched[policy.name] if has_pods else None,
            costed_pods=costed[policy.name] if policy.has("deletionCost") else None,
            labeled_nodes=found.labeled.get(policy.name, 0) if policy.has("nodeLabels") else None,
        )
    return StatusReport(
        counts,
        dict(problems),
        bands,
        foreign_writers(view, outcomes),
        gpu_supply(view),
        gate_yields(view, outcomes),
    )


def _problems(view: ClusterView, found: Findings) -> dict[str, list[Problem]]:
    problems: dict[str, list[Problem]] = defaultdict(list)
    for uid, (failed_policy, message) in found.cost_failures.items():
        if failed_policy is not None:
            failed = view.pods.get(uid)
            where = f"{failed.namespace}/{failed.name}" if failed else uid
            problems[failed_policy].append(
                ("CostWriteFailed", f"writing the cost of {where} failed: {message}")
            )
    for policy_name, stuck in found.stuck.items():
        problems[policy_name] += stuck
    if found.other_installs:
        # First, so that it names the Degraded condition: it outweighs any other problem.
        another = (
            "AnotherInstance",
            "another schedpolicy controller is live in "
            + "; ".join(found.other_installs)
            + ": one install per cluster; this one, the oldest, keeps writing until the"
            " other is removed",
        )
        for policy in view.policies():
            problems[policy.name].insert(0, another)
    for policy in view.policies():
        labelling = policy.spec.node_labels
        refusal = labelling and gpu.prefix_refusal(labelling.gpu, found.admitted_prefixes)
        if refusal:
            problems[policy.name].append(("LabelPrefixNotAdmitted", refusal))
    for policy_name, conflicts in found.label_conflicts.items():
        problems[policy_name] += [("LabelConflict", c) for c in conflicts]
    for node_name, (policy_name, message) in sorted(found.label_failures.items()):
        problems[policy_name].append(
            ("LabelWriteFailed", f"writing the GPU labels of node {node_name} failed: {message}")
        )
    return problems


def gpu_supply(view: ClusterView) -> dict[str, gpu_offers.GPUSupply]:
    """Per placement.gpu policy: the labelled nodes its label term matches now, and the
    instance types its launch term names."""
    out = {}
    for policy in view.policies():
        wanted = policy.spec.placement and policy.spec.placement.gpu
        if not wanted:
            continue
        model_key, memory_key = hints.gpu_label_keys(policy)
        least = wanted.min_memory_mib
        labelled = sum(
            1
            for node in view.nodes.values()
            if gpu_offers.labelled_matches(node.labels, model_key, memory_key, wanted.models, least)
        )
        out[policy.name] = gpu_offers.GPUSupply(
            tuple(wanted.models),
            least,
            gpu_offers.instance_types_for(wanted.models, least),
            labelled,
        )
    return out


def foreign_writers(
    view: ClusterView, outcomes: Mapping[str, PodOutcome]
) -> dict[str, Counter[str]]:
    """Per policy that does not take over: who else owns the cost on the pods it would cost."""
    yielding = {
        p.name
        for p in view.policies()
        if p.spec.deletion_cost and not p.spec.deletion_cost.take_over
    }
    found: dict[str, Counter[str]] = defaultdict(Counter)
    for uid, outcome in outcomes.items():
        pod = view.pods.get(uid)
        if pod is None or outcome.cost_policy not in yielding or outcome.final is None:
            continue
        if outcome.yielded:  # Karpenter's gate: its own condition says so (gate_yields)
            continue
        if pod.cost is not None and FIELD_MANAGER not in pod.cost_managers:
            # A value set at creation may have no manager entry of its own for the key.
            found[outcome.cost_policy].update(pod.cost_managers or {"(unknown)"})
    return dict(found)


def gate_yields(view: ClusterView, outcomes: Mapping[str, PodOutcome]) -> dict[str, GateYield]:
    """Per deletionCost policy, once Karpenter's gate is seen: the pods whose
    pod-deletion-cost it leaves to Karpenter, and of those, the pods that carry its
    karpenter.sh/disruption-cost."""
    sighting = view.karpenter_gate.sighting
    if sighting is None:
        return {}
    yielded: Counter[str] = Counter()
    steered: Counter[str] = Counter()
    for uid, outcome in outcomes.items():
        pod = view.pods.get(uid)
        if pod is None or not outcome.yielded or outcome.cost_policy is None:
            continue
        yielded[outcome.cost_policy] += 1
        ours = FIELD_MANAGER in pod.karpenter_cost_managers
        if ours and outcome.karpenter is not None and pod.karpenter_cost == str(outcome.karpenter):
            steered[outcome.cost_policy] += 1
    return {
        p.name: GateYield(
            sighting,
            yielded[p.name],
            p.spec.deletion_cost.karpenter_disruption_cost is not None,
            steered[p.name],
            p.spec.deletion_cost.take_over,
        )
        for p in view.policies()
        if p.spec.deletion_cost is not None
    }


def observations(
    objects: Sequence[PolicyObject],
    report: StatusReport,
    policies: list[matching.Policy],
    admission: Mapping[str, Route] | None = None,
) -> list[Observation]:
    """What each policy's status should say, before the timestamps are settled."""
    conflicts = matching.conflicts(policies)
    out = []
    for obj in objects:
        problems = report.problems.get(obj.name, [])
        shown = [message for _, message in problems[:SHOWN_PROBLEMS]]
        if len(problems) > SHOWN_PROBLEMS:
            shown.append(f"and {count(len(problems) - SHOWN_PROBLEMS, 'more problem')}")
        out.append(
            Observation(
                name=obj.name,
                generation=obj.generation,
                spec_error=obj.error,
                conflicts=conflicts.get(obj.name, ()),
                degraded=shown,
                degraded_reason=problems[0][0] if problems else "AsExpected",
                counts=report.counts.get(obj.name, Counts()),
                foreign_writers=dict(report.foreign.get(obj.name, {})),
                admission=(admission or {}).get(obj.name),
                gpu_supply=report.gpu_supply.get(obj.name),
                karpenter_gate=report.gate.get(obj.name),
            )
        )
    return out
