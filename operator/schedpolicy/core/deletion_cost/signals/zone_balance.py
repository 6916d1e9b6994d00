"""ZoneBalance: lower cost for the newest pods of a ReplicaSet's most crowded zones. Pure."""

from __future__ import annotations

from collections.abc import Sequence, Set
from datetime import datetime
from typing import Annotated

from pydantic import Field

from schedpolicy.core.deletion_cost.signals.base import (
    PodFacts,
    Ripple,
    Score,
    SignalKind,
    ZoneCounts,
)
from schedpolicy.core.policy.model import MAX_POINTS, Model
from schedpolicy.core.wellknown import ZONE_LABEL


class ZoneBalanceSignal(Model):
    """Lower cost for pods in zones that hold more of their ReplicaSet's pods than the
    least-filled eligible zone (a zone of Ready, schedulable nodes; a zone with 0 pods counts).
    Pods rank by age within their zone; a pod at position k (1-based) in a zone whose
    least-filled peer holds m pods gets pointsPerExcessPod x max(0, k - m). So a scale-down
    of any size takes the newest pods of whichever zone is fullest, and ends balanced."""

    points_per_excess_pod: Annotated[int, Field(ge=-MAX_POINTS, le=-1)] = Field(
        default=-100, description="Points per excess pod in the pod's zone; must be negative."
    )


def score(params: ZoneBalanceSignal, facts: PodFacts, now: datetime) -> Score:
    zone = facts.node_labels.get(ZONE_LABEL) if facts.node_name else None
    if zone is None:
        return Score(0, "the pod's node has no zone")
    spread = facts.zone_spread()
    if not spread.eligible:
        return Score(0, "no eligible zones")
    here = spread.counts.get(zone, 0)
    counts = {z: spread.counts.get(z, 0) for z in spread.eligible}
    least_zone = min(counts, key=lambda z: (counts[z], z))
    least = counts[least_zone]
    # The pod's place in its zone (oldest first) says how far above the least-filled zone it
    # stands: the newest pods of the most crowded zone score lowest, so a scale-down of any
    # size takes pods from whichever zone is fullest at each step and ends balanced.
    rank = spread.rank if spread.rank is not None else here - 1
    excess = max(0, rank + 1 - least)
    return Score(
        params.points_per_excess_pod * excess,
        f"zone {zone} holds {here} of the ReplicaSet's pods, the least-filled eligible zone"
        f" ({least_zone}) {least}; this pod is number {rank + 1} in its zone by age:"
        f" {excess} above it x {params.points_per_excess_pod}",
    )


def moved(
    before: Sequence[ZoneCounts], after: ZoneCounts, eligible: frozenset[str], members: Set[str]
) -> Set[str]:
    """The pods whose score may differ between a spread in `before` and `after`: those whose
    place above the least-filled zone changed, and those unranked in either (not active, or
    on no zoned node), which `score` reads otherwise. A pod's score is its place above the
    least-filled zone times a nonzero parameter, so nothing else can move it."""
    if not eligible:
        return set()  # every pod scores 0
    least_after = min(after.counts.get(z, 0) for z in eligible)
    out: set[str] = set()
    for spread in before:
        least = min(spread.counts.get(z, 0) for z in eligible)
        for uid in members:
            was, now = spread.ranks.get(uid), after.ranks.get(uid)
            if (
                was is None
                or now is None
                or max(0, was + 1 - least) != max(0, now + 1 - least_after)
            ):
                out.add(uid)
    return out


KIND = SignalKind(
    "ZoneBalance",
    "zoneBalance",
    ZoneBalanceSignal,
    score,
    optional=True,
    node_fields=("labels",),
    # A pod that comes, goes or moves changes its ReplicaSet's spread over the zones.
    ripple=Ripple(
        "replicaset", when="active", fields=("replicaset_uid", "node_name"), narrow=moved
    ),
)
