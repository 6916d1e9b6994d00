"""Is another schedpolicy controller live in this cluster? Pure.

Every leader-elected controller holds a Lease of the same name in its own namespace. A
Lease of that name held and renewed in another namespace is another install's controller.
Two would write the same pods and nodes, so only the oldest install writes: the one whose
Lease object was created first (it survives leader changes, unlike its acquire time), then
the namespace that sorts first. The others write nothing until it is gone; the oldest keeps
writing and says on every policy that another one is there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schedpolicy.core.timestamps import parse_nanos

_NANOS = 1_000_000_000


@dataclass(frozen=True)
class Controller:
    namespace: str
    holder: str
    created: int  # nanoseconds since the epoch

    def describe(self, lease: str) -> str:
        return f"namespace {self.namespace} (Lease {self.namespace}/{lease}, held by {self.holder})"


def live_controller(lease: Mapping[str, Any], now: int) -> Controller | None:
    """The controller holding this Lease, if it renewed it within its duration."""
    meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    renewed = parse_nanos(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    created = parse_nanos(meta.get("creationTimestamp"))
    if not holder or renewed is None or not isinstance(duration, int) or created is None:
        return None
    if renewed + duration * _NANOS <= now:
        return None
    return Controller(str(meta.get("namespace", "")), str(holder), created)


@dataclass(frozen=True)
class Verdict:
    others: tuple[Controller, ...]  # live controllers of other installs
    defer_to: Controller | None  # the older one that writes instead of this one

    @property
    def may_write(self) -> bool:
        return self.defer_to is None


def judge(leases: Iterable[Mapping[str, Any]], namespace: str, now: int) -> Verdict:
    """`leases`: every Lease of our name, cluster-wide; `namespace`: ours. A controller with
    no Lease of its own (no leader election) counts as the newest."""
    live = [c for c in (live_controller(lease, now) for lease in leases) if c is not None]
    mine = next((c for c in live if c.namespace == namespace), None)
    others = tuple(sorted((c for c in live if c.namespace != namespace), key=_seniority))
    older = [c for c in others if mine is None or _seniority(c) < _seniority(mine)]
    return Verdict(others, older[0] if older else None)


def _seniority(c: Controller) -> tuple[int, str]:
    return (c.created, c.namespace)
