"""The order in which the ReplicaSet controller deletes pods on scale-down. Pure.

This follows upstream's `ActivePodsWithRanks.Less` (pkg/controller/controller_utils.go,
Kubernetes 1.35 to 1.37: LogarithmicScaleDown is on by default in 1.35 and always on in
1.37, where the gate is gone and the order is otherwise the same): a pod goes first when it is

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
stable). Worse, this comparison is not transitive: two pods ready in the same second skip
rule 6 and are ordered by restarts, while each of them against a third pod, ready a second
apart on the same log2 scale, is ordered by UID, and the three can form a cycle. Go's
`sort.Sort` then returns a victim that depends on the order the informer listed the pods.
`scale_down` finds the groups of pods whose relative order no listing can fix (the strongly
connected components of "may come before"), and a cut that falls inside one is uncertain,
with the group named and the rules that tie it.

Times are integer nanoseconds since the epoch, as upstream's `metav1.Now()` and its
`time.Duration` ages are, and the log2 scale is computed the way Go's `math.Log2` does.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schedpolicy.core.timestamps import parse_nanos
from schedpolicy.core.wellknown import COST_ANNOTATION

_PHASE = {"Pending": 0, "Unknown": 1, "Running": 2}
_INT32 = range(-(2**31), 2**31)


def read_deletion_cost(value: str | None) -> int:
    """The pod-deletion-cost as the ReplicaSet controller reads it, 0 when it cannot.

    Upstream (`GetDeletionCostFromPodAnnotations`) refuses a first character other than
    `-` or 1-9 (so `+5` and `007`, but a lone `0` is fine), then `strconv.ParseInt(v, 10,
    32)`: ASCII digits after an optional sign, no spaces, no underscores, within int32.
    """
    if not value or not (value[0] == "-" or value == "0" or "1" <= value[0] <= "9"):
        return 0
    digits = value[1:] if value[0] == "-" else value
    if not digits or not all("0" <= c <= "9" for c in digits):
        return 0
    number = int(value)
    return number if number in _INT32 else 0


@dataclass(frozen=True)
class RankedPod:
    name: str
    uid: str
    node: str
    phase: str
    ready: bool
    cost: int
    rank: int  # active pods of the same owner on this pod's node
    ready_since: int | None  # nanoseconds since the epoch
    restarts: tuple[int, int]  # regular, sidecar
    created: int | None  # nanoseconds since the epoch


def is_active(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def _ready(pod: Mapping[str, Any]) -> tuple[bool, int | None]:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            return ready, parse_nanos(cond.get("lastTransitionTime")) if ready else None
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
                cost=read_deletion_cost((meta.get("annotations") or {}).get(COST_ANNOTATION)),
                rank=on_node[node],
                ready_since=since,
                restarts=_restarts(pod),
                created=parse_nanos(meta.get("creationTimestamp")),
            )
        )
    return out


_INV_LN2 = 1 / math.log(2)


@functools.lru_cache(maxsize=4096)
def _log_rank(t: int, now: int) -> int:
    """int64(math.Log2(float64(now - t))), -1 for an age that is not positive; Go's Log2
    splits off the exponent first, and so does this, to land on the same side of a power of
    two."""
    age = now - t
    if age <= 0:
        return -1
    fraction, exponent = math.frexp(float(age))
    if fraction == 0.5:
        return exponent - 1
    return int(math.log(fraction) * _INV_LN2 + exponent)


def _by_age(
    a: int | None, b: int | None, now: int, ua: str, ub: str, what: str
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


def compare(a: RankedPod, b: RankedPod, now: int) -> tuple[int, str]:
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
class Uncertainty:
    """The cut falls inside a group of pods that no listing order can put in one order."""

    candidates: tuple[RankedPod, ...]  # the group: any of them may be deleted
    deleted: int  # how many of the group go
    why: str  # the pairwise rules that tie the group together


@dataclass(frozen=True)
class ScaleDown:
    victims: tuple[Victim, ...]
    survivors: tuple[RankedPod, ...]
    uncertainty: Uncertainty | None = None

    @property
    def certain(self) -> bool:
        return self.uncertainty is None


class _Relation:
    """Every pair compared once: `before[i][j]` when pod i is deleted before pod j."""

    def __init__(self, pods: Sequence[RankedPod], now: int) -> None:
        self.pods = pods
        n = len(pods)
        self.before = [[False] * n for _ in range(n)]
        self.why: dict[tuple[int, int], str] = {}
        for i in range(n):
            for j in range(i + 1, n):
                sign, why = compare(pods[i], pods[j], now)
                if sign < 0:
                    self.before[i][j] = True
                elif sign > 0:
                    self.before[j][i] = True
                self.why[(i, j)] = self.why[(j, i)] = why

    def order(self) -> tuple[list[int], list[int]]:
        """The pods in an order Go's sort may return, and the start of each group in it.

        Sorting by how many pods come strictly before each one puts every group after all
        pods of earlier groups (all of those come before each of its pods, and fewer of its
        own). A group ends where every pod so far comes before every pod after.
        """
        n = len(self.pods)
        ahead = [sum(self.before[k][i] for k in range(n)) for i in range(n)]
        order = sorted(range(n), key=lambda i: (ahead[i], self.pods[i].uid))
        # reach[p]: the first position whose pod does not come before the pod at p.
        reach = [
            next(q for q in range(p + 1) if not self.before[order[q]][order[p]]) for p in range(n)
        ]
        starts, lowest = [], n
        for p in range(n - 1, -1, -1):
            lowest = min(lowest, reach[p])
            if lowest == p:
                starts.append(p)
        return order, starts[::-1]

    def cycle(self, group: Sequence[int]) -> str:
        """Why `group` has no order: a round trip of 'may come before' through it."""
        members = set(group)
        if all(not self.before[i][j] for i in group for j in group):
            names = ", ".join(self.pods[i].name for i in group)
            return f"{names} are equal on every criterion up to the UID"
        start = group[0]
        came_from: dict[int, int] = {}
        queue, last = deque([start]), start
        while queue:
            i = queue.popleft()
            if i != start and not self.before[start][i]:
                last = i  # i may come before start: the way back closes the round trip
                break
            # Strict steps first, so that the story is told in rules where it can be.
            for j in sorted(members - {i, start}, key=lambda j: (not self.before[i][j], j)):
                if j not in came_from and not self.before[j][i]:
                    came_from[j] = i
                    queue.append(j)
        path = [last]
        while path[-1] != start:
            path.append(came_from[path[-1]])
        path = [*reversed(path), start]
        steps = []
        for i, j in itertools.pairwise(path):
            a, b = self.pods[i].name, self.pods[j].name
            if self.before[i][j]:
                steps.append(f"{a} before {b} by {self.why[(i, j)]}")
            else:
                steps.append(f"{a} and {b} tie")
        return "; ".join(steps)


def scale_down(pods: Sequence[RankedPod], replicas: int, now: int) -> ScaleDown:
    relation = _Relation(pods, now)
    positions, starts = relation.order()
    ordered = [pods[i] for i in positions]
    cut = max(0, len(ordered) - replicas)
    victims, survivors = ordered[:cut], ordered[cut:]
    uncertainty = None
    if 0 < cut < len(ordered) and cut not in starts:
        lo = max(s for s in starts if s < cut)
        hi = min((s for s in starts if s > cut), default=len(ordered))
        group = positions[lo:hi]
        uncertainty = Uncertainty(tuple(pods[i] for i in group), cut - lo, relation.cycle(group))
    first = survivors[0] if survivors else None
    explained = tuple(
        Victim(p, compare(p, first, now)[1] if first is not None else "every pod goes")
        for p in victims
    )
    return ScaleDown(explained, tuple(survivors), uncertainty)
