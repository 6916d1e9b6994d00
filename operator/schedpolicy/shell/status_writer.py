"""Writes each SchedulingPolicy's status, and an Event when a condition turns.

What a status says comes from view/reports.py and core/policy/status.py; this writes it
only when something other than timestamps differs, and never twice the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from schedpolicy.core import api, timestamps
from schedpolicy.core.policy.status import (
    Observation,
    desired_status,
    is_problem,
    needs_write,
    transitions,
)
from schedpolicy.shell import metrics
from schedpolicy.shell.events import Events
from schedpolicy.shell.kube import Kube, ObjectRef
from schedpolicy.shell.kube_errors import Gone, KubeError
from schedpolicy.view.cluster import PolicyObject


class StatusWriter:
    def __init__(self, kube: Kube, events: Events) -> None:
        self.kube, self.events = kube, events
        # What we last wrote, so that a write is not repeated before its watch event arrives.
        self._written: dict[str, dict[str, Any]] = {}

    def forget_writes(self) -> None:
        self._written.clear()

    async def write_all(
        self, objects: Sequence[PolicyObject], observed: Sequence[Observation], now: datetime
    ) -> None:
        live = {o.name for o in objects}
        for name in [n for n in self._written if n not in live]:
            del self._written[name]
        stamp = timestamps.render(now)
        decided: dict[str, dict[str, str]] = {}
        for obj, obs in zip(objects, observed, strict=True):
            desired = desired_status(obs, obj.status, stamp)
            decided[obj.name] = {c["type"]: c["status"] for c in desired["conditions"]}
            if needs_write(obj.status, desired) and needs_write(
                self._written.get(obj.name), desired
            ):
                await self._write(obj, desired)
        metrics.set_policy_conditions(decided)

    async def _write(self, obj: PolicyObject, desired: dict[str, Any]) -> None:
        try:
            await self.kube.patch_policy_status(obj.name, desired)
        except Gone:
            return  # deleted meanwhile; its DELETED event will follow
        except KubeError:
            metrics.STATUS_WRITES.labels(result="error").inc()
            raise
        metrics.STATUS_WRITES.labels(result="ok").inc()
        self._written[obj.name] = desired
        ref = ObjectRef(api.API_VERSION, api.KIND, obj.name, obj.uid)
        before = {c.get("type"): c for c in obj.status.get("conditions", []) or []}
        for cond in transitions(obj.status, desired):
            # A problem is worth a Warning Event, and its end a Normal one; so is leaving a
            # field to another writer (Yielding), which changes what the policy writes.
            warning = is_problem(cond)
            old = before.get(cond["type"])
            recovered = old is not None and is_problem(old)
            if not (warning or recovered or cond["type"] in ("Ready", "Yielding")):
                continue
            kind = "Warning" if warning else "Normal"
            message = f"{cond['type']}={cond['status']}: {cond['message']}".rstrip(": ")
            await self.events.post(ref, kind, cond["reason"], message)
