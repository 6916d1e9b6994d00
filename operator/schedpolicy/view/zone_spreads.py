"""Each ReplicaSet's spread over the zones, cached, and the spreads its pods' costs may have
been planned against since the reconciler last asked, so that a pod's change re-costs only
the pods of its ReplicaSet that the change moves. No I/O.

Every plan reads a spread from the cache, so every spread a plan may have read is either
still cached or was set aside when its ReplicaSet changed (`invalidate`). Comparing all of
those with the spread now finds every pod a plan may have costed differently.
"""

from __future__ import annotations

from collections.abc import Set

from schedpolicy.core.deletion_cost.signals.base import Narrow, Ripple, ZoneCounts


def narrowing(ripples: tuple[Ripple, ...]) -> Narrow | None:
    """The narrowing of the one ReplicaSet-scope ripple. None (every pod) when there is
    none, or several: their union would do, but no second signal reads a spread yet."""
    narrows = [r.narrow for r in ripples if r.scope == "replicaset"]
    return narrows[0] if len(narrows) == 1 else None


class ZoneSpreads:
    def __init__(self, narrow: Narrow | None) -> None:
        self._cache: dict[str, ZoneCounts] = {}
        # ReplicaSet UID -> spreads dropped from the cache since the reconciler last asked.
        self._read: dict[str, list[ZoneCounts]] = {}
        self._narrow = narrow

    def get(self, replicaset_uid: str) -> ZoneCounts | None:
        return self._cache.get(replicaset_uid)

    def put(self, replicaset_uid: str, spread: ZoneCounts) -> None:
        self._cache[replicaset_uid] = spread

    def invalidate(self, replicaset_uid: str) -> None:
        spread = self._cache.pop(replicaset_uid, None)
        if spread is not None:
            self._read.setdefault(replicaset_uid, []).append(spread)

    def clear(self) -> None:
        """The eligible zones changed: every pod is planned again, nothing to compare."""
        self._cache.clear()
        self._read.clear()

    def forget_reads(self) -> None:
        """Every pod is about to be planned again: what was set aside would only widen the
        next comparison (a superset of spreads finds a superset of pods), and holds memory."""
        self._read.clear()

    def moved(
        self, replicaset_uid: str, now: ZoneCounts, eligible: frozenset[str], members: Set[str]
    ) -> Set[str]:
        """The members whose cost may have moved since the last time this was asked. All of
        them when no spread was set aside: no plan read one that this could compare."""
        before = self._read.pop(replicaset_uid, None)
        if before is None or self._narrow is None:
            return members
        return self._narrow(before, now, eligible, members)
