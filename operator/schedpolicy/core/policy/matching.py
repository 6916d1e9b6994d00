"""Which policy governs a pod or a node, and which policies conflict. Pure.

Precedence is the same everywhere: among the policies that match an object and
have the capability in question, the highest `priority` wins; on a tie, the
policy whose name sorts first wins. Equal-priority policies whose selectors can
select a common object are reported as Conflicting, both of them, so an admin
can resolve the tie on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from schedpolicy.core.api import SchedulingPolicySpec
from schedpolicy.core.policy.model import LabelSelector, LabelSelectorRequirement

Capability = Literal["deletionCost", "nodeLabels", "placement"]
CAPABILITIES: tuple[Capability, ...] = ("deletionCost", "nodeLabels", "placement")


@dataclass(frozen=True)
class Policy:
    """A parsed SchedulingPolicy as the core sees it."""

    name: str
    spec: SchedulingPolicySpec
    generation: int = 1
    uid: str = ""

    def has(self, capability: Capability) -> bool:
        if capability == "deletionCost":
            return self.spec.deletion_cost is not None
        if capability == "nodeLabels":
            return self.spec.node_labels is not None
        return self.spec.placement is not None

    def node_selector(self) -> LabelSelector | None:
        labels = self.spec.node_labels
        return labels.gpu.node_selector if labels is not None else None


def precedence(policy: Policy) -> tuple[int, str]:
    """Sort key: the first policy in this order wins."""
    return (-policy.spec.priority, policy.name)


# ---- label selectors ---------------------------------------------------------------------


def requirement_matches(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    if req.operator == "In":
        return present and labels[req.key] in (req.values or [])
    return not present or labels[req.key] not in (req.values or [])


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes semantics: an absent or empty selector matches everything."""
    if selector is None:
        return True
    for key, value in (selector.match_labels or {}).items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(r, labels) for r in selector.match_expressions or [])


@dataclass
class _KeyConstraint:
    """What one selector demands of one label key."""

    must_exist: bool = False
    must_not_exist: bool = False
    allowed: set[str] | None = None  # None: any value
    forbidden: set[str] = field(default_factory=set)

    def add(self, req: LabelSelectorRequirement) -> None:
        values = set(req.values or [])
        if req.operator == "Exists":
            self.must_exist = True
        elif req.operator == "DoesNotExist":
            self.must_not_exist = True
        elif req.operator == "In":
            self.must_exist = True
            self.allowed = values if self.allowed is None else self.allowed & values
        else:
            self.forbidden |= values

    def satisfiable_with(self, other: _KeyConstraint) -> bool:
        exists = self.must_exist or other.must_exist
        absent = self.must_not_exist or other.must_not_exist
        if exists and absent:
            return False
        if absent:
            return True
        allowed = self.allowed
        if other.allowed is not None:
            allowed = other.allowed if allowed is None else allowed & other.allowed
        if allowed is None:
            return True  # infinitely many values remain
        return bool(allowed - self.forbidden - other.forbidden)


def _constraints(selector: LabelSelector | None) -> dict[str, _KeyConstraint]:
    out: dict[str, _KeyConstraint] = {}
    if selector is None:
        return out
    for key, value in (selector.match_labels or {}).items():
        out.setdefault(key, _KeyConstraint()).add(
            LabelSelectorRequirement(key=key, operator="In", values=[value])
        )
    for req in selector.match_expressions or []:
        out.setdefault(req.key, _KeyConstraint()).add(req)
    return out


def selectors_may_overlap(a: LabelSelector | None, b: LabelSelector | None) -> bool:
    """True unless no label set can satisfy both selectors.

    Exact for selectors built from matchLabels and In/NotIn/Exists/DoesNotExist,
    because every key is constrained independently.
    """
    ca, cb = _constraints(a), _constraints(b)
    for key in ca.keys() | cb.keys():
        if not ca.get(key, _KeyConstraint()).satisfiable_with(cb.get(key, _KeyConstraint())):
            return False
    return True


# ---- policies ----------------------------------------------------------------------------


def may_overlap(a: Policy, b: Policy, capability: Capability) -> bool:
    if not (a.has(capability) and b.has(capability)):
        return False
    if capability == "nodeLabels":
        return selectors_may_overlap(a.node_selector(), b.node_selector())
    return selectors_may_overlap(
        a.spec.namespace_selector, b.spec.namespace_selector
    ) and selectors_may_overlap(a.spec.pod_selector, b.spec.pod_selector)


@dataclass(frozen=True)
class Conflict:
    capability: Capability
    policy: str
    other: str
    priority: int

    @property
    def winner(self) -> str:
        return min(self.policy, self.other)

    def describe(self) -> str:
        return (
            f"{self.capability} of {self.policy} and {self.other} can select the same objects"
            f" at equal priority {self.priority}; {self.winner} wins because its name sorts first"
        )


def conflicts(policies: Iterable[Policy]) -> dict[str, list[Conflict]]:
    """Every equal-priority overlap, listed under both policies."""
    ordered = sorted(policies, key=precedence)
    found: dict[str, list[Conflict]] = {p.name: [] for p in ordered}
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if a.spec.priority != b.spec.priority:
                continue
            for capability in CAPABILITIES:
                if may_overlap(a, b, capability):
                    found[a.name].append(Conflict(capability, a.name, b.name, a.spec.priority))
                    found[b.name].append(Conflict(capability, b.name, a.name, a.spec.priority))
    return found


@dataclass(frozen=True)
class Match:
    """The outcome of choosing a governing policy, with the reasons."""

    policy: Policy | None
    candidates: tuple[str, ...]
    reason: str


def _choose(matching: Iterable[Policy], capability: Capability, subject: str) -> Match:
    ranked = sorted(matching, key=precedence)
    names = tuple(p.name for p in ranked)
    if not ranked:
        return Match(None, names, f"no policy with {capability} selects this {subject}")
    winner = ranked[0]
    reason = f"{winner.name} selects this {subject} with priority {winner.spec.priority}"
    if len(ranked) > 1:
        reason += f"; it outranks {', '.join(names[1:])}"
    return Match(winner, names, reason)


def governing_policy(
    policies: Iterable[Policy],
    capability: Capability,
    pod_labels: Mapping[str, str],
    namespace_labels: Mapping[str, str],
) -> Match:
    """The policy that governs a pod for `capability`, if any."""
    return _choose(
        (
            p
            for p in policies
            if p.has(capability)
            and selector_matches(p.spec.namespace_selector, namespace_labels)
            and selector_matches(p.spec.pod_selector, pod_labels)
        ),
        capability,
        "pod",
    )


def governing_node_policy(policies: Iterable[Policy], node_labels: Mapping[str, str]) -> Match:
    """The policy whose nodeLabels govern a node, if any."""
    return _choose(
        (
            p
            for p in policies
            if p.has("nodeLabels") and selector_matches(p.node_selector(), node_labels)
        ),
        "nodeLabels",
        "node",
    )
