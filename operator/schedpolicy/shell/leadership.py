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

from schedpolicy.shell import metrics
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
        self._leading_task: asyncio.Task[None] | None = None

    async def _started(self) -> None:
        self.leading = True
        metrics.set_leader(True)
        self._leading_task = asyncio.current_task()
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
            metrics.set_leader(False)

    async def _stopped(self) -> None:
        self.leading = False
        metrics.set_leader(False)
        log.warning(
            "%s lost the Lease %s/%s; writing stopped",
            self.settings.identity,
            self.settings.namespace,
            self.settings.name,
        )

    async def _release(self) -> None:
        """On shutdown: stop writing first, then hand the Lease back, so that a deleted
        leader's successor takes over in a retry period, not a whole lease duration."""
        task, self._leading_task = self._leading_task, None
        if task is None:
            return
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        s = self.settings
        try:
            if await self.kube.release_lease(s.name, s.namespace, s.identity):
                log.info("%s released the Lease %s/%s", s.identity, s.namespace, s.name)
        except Exception as err:
            # It expires on its own: the successor only waits longer.
            log.warning("could not release the Lease: %s", err)

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
                await self._release()
                raise
            except Exception:
                log.exception("leader election failed; retrying")
            await asyncio.sleep(s.retry_period)
