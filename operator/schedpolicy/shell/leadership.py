"""Lease-based leader election: only the leader writes.

Every replica watches and keeps its view warm, and every replica serves the
admission webhook; only the holder of the Lease runs the reconciler. A leader
that cannot renew within `renew_deadline` stops writing before the Lease
expires (`lease_duration` > `renew_deadline`), so two writers never overlap.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kubernetes_asyncio.leaderelection import electionconfig, leaderelection

from schedpolicy.shell.kube import Kube

log = logging.getLogger("schedpolicy.leadership")


@dataclass(frozen=True)
class LeaseSettings:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class Leadership:
    def __init__(
        self, kube: Kube, settings: LeaseSettings, lead: Callable[[], Awaitable[None]]
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.lead = lead
        self.leading = False

    async def _started(self) -> None:
        self.leading = True
        log.info(
            "%s leads (Lease %s/%s)",
            self.settings.identity,
            self.settings.namespace,
            self.settings.name,
        )
        try:
            await self.lead()
        finally:
            self.leading = False

    async def _stopped(self) -> None:
        self.leading = False
        log.warning(
            "%s lost the Lease %s/%s; writing stopped",
            self.settings.identity,
            self.settings.namespace,
            self.settings.name,
        )

    async def run(self) -> None:
        s = self.settings
        while True:
            election = leaderelection.LeaderElection(
                electionconfig.Config(
                    self.kube.lease_lock(s.name, s.namespace, s.identity),
                    # The client stores the duration as text and parses it back as an integer.
                    lease_duration=int(s.lease_duration),
                    renew_deadline=s.renew_deadline,
                    retry_period=s.retry_period,
                    onstarted_leading=self._started,
                    onstopped_leading=self._stopped,
                )
            )
            try:
                await election.run()  # returns once leadership is lost
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("leader election failed; retrying")
            await asyncio.sleep(s.retry_period)
