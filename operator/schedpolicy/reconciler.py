"""The write side of the operator: turns the view into decisions and decisions into writes.

Watch handlers only update the ClusterView and mark what changed; this loop
wakes up, recomputes what the change affects with the pure core, and hands the
differences to kube.py. Keeping one writer makes ordering, deduplication and
(later) leader election simple.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from schedpolicy import api, matching, metrics
from schedpolicy.cluster import ClusterView, PolicyObject
from schedpolicy.kube import Kube, ObjectRef
from schedpolicy.policy_status import Observation, desired_status, needs_write, transitions

log = logging.getLogger("schedpolicy.reconciler")

# Conditions in these states are worth a Warning Event; any other transition is Normal.
_WARNING = {("Ready", "False"), ("Conflicting", "True"), ("Degraded", "True")}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        view: ClusterView,
        *,
        debounce: float = 0.2,
        now: Callable[[], str] = _now,
    ) -> None:
        self.kube = kube
        self.view = view
        self.debounce = debounce
        self.now = now
        self._wake = asyncio.Event()
        self._policies_dirty = True
        # What we last wrote, so that a write is not repeated before its watch event arrives.
        self._written_status: dict[str, dict[str, Any]] = {}

    def policies_changed(self) -> None:
        self._policies_dirty = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            # Let a burst of events (the initial listing, a kubectl apply -f dir/) settle.
            await asyncio.sleep(self.debounce)
            self._wake.clear()
            try:
                await self.reconcile_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconcile failed; retrying in 5s")
                await asyncio.sleep(5)
                self._wake.set()

    async def reconcile_once(self) -> None:
        if self._policies_dirty:
            self._policies_dirty = False
            await self.reconcile_policy_statuses()

    async def reconcile_policy_statuses(self) -> None:
        objects = list(self.view.policy_objects())
        conflicts = matching.conflicts(self.view.policies())
        live = {o.name for o in objects}
        for name in list(self._written_status):
            if name not in live:
                del self._written_status[name]
        for obj in objects:
            obs = Observation(
                name=obj.name,
                generation=obj.generation,
                spec_error=obj.error,
                conflicts=conflicts.get(obj.name, ()),
            )
            desired = desired_status(obs, obj.status, self.now())
            if not needs_write(obj.status, desired):
                continue
            if not needs_write(self._written_status.get(obj.name), desired):
                continue
            await self._write_status(obj, desired)

    async def _write_status(self, obj: PolicyObject, desired: dict[str, Any]) -> None:
        try:
            await self.kube.patch_policy_status(obj.name, desired)
        except ApiException as err:
            if err.status == 404:
                return  # deleted meanwhile; its DELETED event will follow
            metrics.STATUS_WRITES.labels(result="error").inc()
            raise
        metrics.STATUS_WRITES.labels(result="ok").inc()
        self._written_status[obj.name] = desired
        ref = ObjectRef(api.API_VERSION, api.KIND, obj.name, obj.uid)
        before = {c.get("type"): c.get("status") for c in obj.status.get("conditions", []) or []}
        for cond in transitions(obj.status, desired):
            warning = (cond["type"], cond["status"]) in _WARNING
            recovered = (cond["type"], before.get(cond["type"])) in _WARNING
            if not (warning or recovered or cond["type"] == "Ready"):
                continue
            kind = "Warning" if warning else "Normal"
            reason = cond["reason"]
            message = f"{cond['type']}={cond['status']}: {cond['message']}".rstrip(": ")
            try:
                await self.kube.emit_event(ref, kind, reason, message)
            except ApiException as err:
                log.warning("could not post event on %s: %s", obj.name, err.reason)
