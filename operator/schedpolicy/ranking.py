"""The order in which the ReplicaSet controller deletes pods on scale-down. Pure.

This follows upstream's `ActivePodsWithRanks.Less` (pkg/controller/controller_utils.go,
Kubernetes 1.35, with LogarithmicScaleDown on, its default): a pod goes first when it is

1. unassigned (no node) while the other is assigned;
2. in an earlier phase: Pending < Unknown < Running;
3. not ready while the other is ready;
4. of lower pod-deletion-cost;
5. on a node with more pods of the same owner (ranks count the active pods of every
   ReplicaSet of the same Deployment, on the pod's node);
6. ready more recently, compared on a log2 scale of age; the same scale means UID order;
7. restarted more (regular containers, then sidecars);
8. created more recently, on the same log2 scale, then UID order.

Pods equal on all of these are a tie the controller breaks arbitrarily (Go's sort is not
stable), so a prediction whose cut falls inside a tie is reported as uncertain.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
_PHASE = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True)
class RankedPod:
    name: str
    uid: str
    node: str
    phase: str
    ready: bool
    cost: int
    rank: int  # active pods of the same owner on this pod's node
    ready_since: datetime | None
    restarts: tuple[int, int]  # regular, sidecar
    created: datetime | None


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _cost(annotations: Mapping[str, str]) -> int:
    # Upstream ignores an unparsable or out-of-range value and uses 0.
    try:
        value = int(annotations.get(COST_ANNOTATION, "0"))
    except ValueError:
        return 0
    return value if -(2**31) <= value < 2**31 else 0


def is_active(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def _ready(pod: Mapping[str, Any]) -> tuple[bool, datetime | None]:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            return ready, _time(cond.get("lastTransitionTime")) if ready else None
    return False, None


def _restarts(pod: Mapping[str, Any]) -> tuple[int, int]:
    status = pod.get("status") or {}
    regular = max(
        (int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or []), default=0
    )
    sidecars = {
        c["name"]
        for c in (pod.get("spec") or {}).get("initContainers") or []
        if c.get("restartPolicy") == "Always"
    }
    sidecar = max(
        (
            int(c.get("restartCount", 0))
            for c in status.get("initContainerStatuses") or []
            if c["name"] in sidecars
        ),
        default=0,
    )
    return regular, sidecar


def rank_pods(
    pods: Iterable[Mapping[str, Any]], related: Iterable[Mapping[str, Any]]
) -> list[RankedPod]:
    """The controller's view of `pods` (the ReplicaSet's active pods); `related` are the
    pods of every ReplicaSet with the same owner, which count toward co-location."""
    on_node = Counter((p.get("spec") or {}).get("nodeName") or "" for p in related if is_active(p))
    out = []
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ready, since = _ready(pod)
        node = spec.get("nodeName") or ""
        out.append(
            RankedPod(
                name=meta["name"],
                uid=meta["uid"],
                node=node,
                phase=(pod.get("status") or {}).get("phase") or "Pending",
                ready=ready,
                cost=_cost(meta.get("annotations") or {}),
                rank=on_node[node],
                ready_since=since,
                restarts=_restarts(pod),
                created=_time(meta.get("creationTimestamp")),
            )
        )
    return out


def _log_rank(t: datetime, now: datetime) -> int:
    nanos = (now - t).total_seconds() * 1e9
    return int(math.log2(nanos)) if nanos > 0 else -1


def _by_age(
    a: datetime | None, b: datetime | None, now: datetime, ua: str, ub: str, what: str
) -> tuple[int, str] | None:
    """Newer first; ages on the same log2 scale fall back to UID order."""
    if a == b:
        return None
    if a is None or b is None:
        # A zero time counts as newer than any other.
        return (-1 if a is None else 1), f"{what} unknown"
    diff = _log_rank(a, now) - _log_rank(b, now)
    if diff == 0:
        if ua == ub:
            return None
        return (-1 if ua < ub else 1), f"{what} on the same log scale: UID order"
    return (-1 if diff < 0 else 1), f"more recently {what}"


def compare(a: RankedPod, b: RankedPod, now: datetime) -> tuple[int, str]:
    """(-1, why) if `a` is deleted before `b`, (1, why) if after, (0, 'tie')."""
    if a.node != b.node and (not a.node or not b.node):
        return (-1 if not a.node else 1), "not scheduled"
    if _PHASE.get(a.phase, 0) != _PHASE.get(b.phase, 0):
        return (-1 if _PHASE.get(a.phase, 0) < _PHASE.get(b.phase, 0) else 1), "earlier phase"
    if a.ready != b.ready:
        return (-1 if not a.ready else 1), "not ready"
    if a.cost != b.cost:
        return (-1 if a.cost < b.cost else 1), "lower pod-deletion-cost"
    if a.rank != b.rank:
        return (-1 if a.rank > b.rank else 1), "more replicas on the same node"
    if a.ready and b.ready:
        aged = _by_age(a.ready_since, b.ready_since, now, a.uid, b.uid, "ready")
        if aged is not None:
            return aged
    if a.restarts != b.restarts:
        return (-1 if a.restarts > b.restarts else 1), "more restarts"
    aged = _by_age(a.created, b.created, now, a.uid, b.uid, "created")
    if aged is not None:
        return aged
    return 0, "tie"


@dataclass(frozen=True)
class Victim:
    pod: RankedPod
    reason: str  # what puts it ahead of the first survivor


@dataclass(frozen=True)
class ScaleDown:
    victims: tuple[Victim, ...]
    survivors: tuple[RankedPod, ...]
    certain: bool  # False when the cut falls inside a tie


def scale_down(pods: Sequence[RankedPod], replicas: int, now: datetime) -> ScaleDown:
    def order(a: RankedPod, b: RankedPod) -> int:
        return compare(a, b, now)[0]

    ordered = sorted(pods, key=functools.cmp_to_key(order))
    cut = max(0, len(ordered) - replicas)
    victims, survivors = ordered[:cut], ordered[cut:]
    certain = not (victims and survivors and compare(victims[-1], survivors[0], now)[0] == 0)
    first = survivors[0] if survivors else None
    explained = tuple(
        Victim(p, compare(p, first, now)[1] if first is not None else "every pod goes")
        for p in victims
    )
    return ScaleDown(explained, tuple(survivors), certain)
