"""Karpenter's PodDeletionCostManagement gate, and why a policy leaves pod-deletion-cost to it.
Pure.

With the gate on (Karpenter v1.15, sigs.k8s.io/karpenter pkg/controllers/pod/deletioncost),
Karpenter writes pod-deletion-cost itself on the ReplicaSet pods of the nodes it manages. It
runs once a minute when its cluster state changed (at least every 5 minutes): it writes -n..-1
in its consolidation order on the nodes it ranks, and on the nodes it skips (a do-not-disrupt
pod or node, a nominated or uninitialized node, a PDB that blocks eviction, a pod nothing would
recreate, no price, consolidation off, beyond the disruption budget) it DELETES the annotation,
whoever wrote it. The deletion takes the field's managedFields entry with it, so the pod then
looks as if nobody had ever costed it.

A second writer there is a war by construction: ours would be overwritten or deleted every
cycle, and a policy that took each deleted cost for a new pod would write it again. So once
the controller has seen the gate at work, every policy leaves pod-deletion-cost to Karpenter
on every pod of a Karpenter node, whatever `takeOver` says, and steers Karpenter instead
through karpenter.sh/disruption-cost, which the gate's own ranking reads (when the policy opts
in with `karpenterDisruptionCost`). Pods on other nodes are costed as before.

What showed the gate is kept (a `Sighting`) for the controller's life: a deletion leaves no
trace, so nothing later would show it again. A restart finds it again from any pod whose
pod-deletion-cost Karpenter manages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from schedpolicy.core.wellknown import (
    FIELD_MANAGER,
    KARPENTER_FIELD_MANAGER,
    KARPENTER_NODEPOOL_LABEL,
)
from schedpolicy.core.wording import count, verb

REASON = "KarpenterDeletionCostGate"
# What a plan says when it leaves pod-deletion-cost to the gate (a metric label, too).
PLAN_REASON: Final = "karpenter-gate"
# What the gate does each cycle, said once for the status and for explain.
CYCLE = (
    "every 60 s when its cluster state changed (at least every 5 min) it writes"
    " pod-deletion-cost on the ReplicaSet pods of the nodes it ranks, and deletes it, whoever"
    " wrote it, on the nodes it skips (a do-not-disrupt pod, a nominated or uninitialized"
    " node, a PDB that blocks eviction, beyond the disruption budget)"
)


@dataclass(frozen=True)
class Sighting:
    """What showed the controller that Karpenter's gate is on."""

    kind: Literal["wrote", "deleted", "status"]
    pod: str = ""  # namespace/name
    node: str | None = None
    policy: str = ""  # for "status": the policy whose status says so

    def describe(self) -> str:
        if self.kind == "wrote":
            return (
                f"field manager {KARPENTER_FIELD_MANAGER} wrote pod-deletion-cost on pod {self.pod}"
            )
        if self.kind == "deleted":
            return (
                f"the pod-deletion-cost {FIELD_MANAGER} wrote on pod {self.pod} (Karpenter node"
                f" {self.node}) was deleted by another writer, as the gate does on the nodes it"
                " skips"
            )
        return f"the controller says so in the status of policy {self.policy}"


class Memory:
    """What showed the controller that Karpenter's gate is on: the first sign, kept for the
    controller's life, since the gate's deletions leave no trace to be found again."""

    def __init__(self) -> None:
        self.sighting: Sighting | None = None

    def see(self, sighting: Sighting | None) -> bool:
        """Remember the first sign; True when this is it (every pod of a Karpenter node must
        then be planned again, as its pod-deletion-cost is Karpenter's from now on)."""
        if sighting is None or self.sighting is not None:
            return False
        self.sighting = sighting
        return True

    def saw_write(self, pod: tuple[str, str], managers: frozenset[str]) -> bool:
        """A pod-deletion-cost Karpenter manages: the gate wrote it (see `see`)."""
        if KARPENTER_FIELD_MANAGER not in managers or self.sighting is not None:
            return False
        return self.see(Sighting("wrote", "/".join(pod)))

    def covers(self, node_labels: Mapping[str, str] | None) -> bool:
        """Whether pod-deletion-cost on a node with these labels is Karpenter's."""
        return self.sighting is not None and KARPENTER_NODEPOOL_LABEL in (node_labels or {})


def deleted(
    pod: str,
    before: tuple[str | None, frozenset[str]],
    after: str | None,
    *,
    active: bool,
    node: str | None,
    node_labels: Mapping[str, str] | None,
    our_removal: str | None,
) -> Sighting | None:
    """Our pod-deletion-cost gone from a live pod of a Karpenter node, and not by a removal of
    ours (`our_removal`: the value we last removed, or are removing, from this pod)."""
    cost, managers = before
    if cost is None or after is not None or not active or node is None:
        return None
    if FIELD_MANAGER not in managers or our_removal == cost:
        return None
    if KARPENTER_NODEPOOL_LABEL not in (node_labels or {}):
        return None
    return Sighting("deleted", pod, node)


def from_status(policy: str, status: Mapping[str, Any] | None) -> Sighting | None:
    """What the controller said in a policy's status: for `explain`, which reads a snapshot
    and cannot see a deletion that happened before it looked."""
    for condition in (status or {}).get("conditions") or ():
        if (condition.get("type"), condition.get("status"), condition.get("reason")) == (
            "Yielding",
            "True",
            REASON,
        ):
            return Sighting("status", policy=policy)
    return None


@dataclass(frozen=True)
class GateYield:
    """One policy's share of the pods it leaves to the gate, for its status."""

    sighting: Sighting
    yielded: int  # pods of Karpenter nodes whose pod-deletion-cost the policy leaves alone
    steering: bool  # the policy writes karpenter.sh/disruption-cost
    steered: int  # of those pods, how many carry the policy's karpenter.sh/disruption-cost
    take_over: bool

    def condition(self) -> tuple[str, str, str]:
        """The `Yielding` condition: status, reason, message."""
        pods = count(self.yielded, "pod")
        parts = [
            f"Karpenter's PodDeletionCostManagement gate is on ({self.sighting.describe()}):"
            f" {CYCLE}. A second writer there would be a write war, so this policy leaves"
            f" pod-deletion-cost to Karpenter on the pods of Karpenter nodes (label"
            f" {KARPENTER_NODEPOOL_LABEL}): {pods} now"
        ]
        if self.take_over:
            parts.append(
                "takeOver: true does not apply there: Karpenter would overwrite or delete the"
                " value on its next cycle, every cycle"
            )
        if self.steering:
            parts.append(
                "it steers Karpenter's ranking through karpenter.sh/disruption-cost instead,"
                f" which the gate reads ({self.steered} of them"
                f" {verb(self.steered, 'carries', 'carry')} this policy's value)"
            )
        else:
            parts.append(
                "it does not steer Karpenter: set deletionCost.karpenterDisruptionCost to weigh"
                " its pods in the gate's ranking through karpenter.sh/disruption-cost"
            )
        parts.append("pods on other nodes keep this policy's pod-deletion-cost")
        return "True", REASON, "; ".join(parts)


def explain(sighting: Sighting, node: str, take_over: bool, steering: bool) -> str:
    """Why `explain pod` shows no pod-deletion-cost write for a pod of a Karpenter node."""
    line = (
        f"pod-deletion-cost is left to Karpenter's PodDeletionCostManagement gate on node {node}"
        f" (a Karpenter node): {sighting.describe()}"
    )
    if take_over:
        line += "; takeOver does not apply here (Karpenter would undo it every cycle)"
    if steering:
        return line + "; karpenter.sh/disruption-cost is still written, and the gate ranks by it"
    return line + "; the policy does not write karpenter.sh/disruption-cost, so it does not steer"
