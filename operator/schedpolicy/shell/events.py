"""Kubernetes Events about pods, nodes and policies, posted on a best-effort basis."""

from __future__ import annotations

import logging

from schedpolicy.shell.kube import Kube, ObjectRef

log = logging.getLogger("schedpolicy.events")


class Events:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def post(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        # An Event that cannot be posted (often for the very outage it reports) must never
        # take a writer down with it.
        try:
            await self.kube.post_event(ref, type_, reason, message)
        except Exception as err:
            log.warning("could not post event on %s %s: %s", ref.kind, ref.name, err)

    async def warn(self, ref: ObjectRef, reason: str, message: str) -> None:
        await self.post(ref, "Warning", reason, message)
