"""One writer per cluster: runs the writers only while no older install's controller is
live (the shell around installs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from schedpolicy.core import installs
from schedpolicy.shell.kube import Kube

log = logging.getLogger("schedpolicy.installs")
LEASES = "/apis/coordination.k8s.io/v1/leases"


class InstallGuard:
    def __init__(
        self,
        kube: Kube,
        lease: str,
        namespace: str,
        report: Callable[[tuple[str, ...]], None],
        interval: float = 5.0,
    ) -> None:
        self.kube = kube
        self.lease = lease
        self.namespace = namespace
        self.report = report  # the other installs, described, for the policies' status
        self.interval = interval

    async def verdict(self) -> installs.Verdict | None:
        try:
            leases = await self.kube.items(LEASES, fieldSelector=f"metadata.name={self.lease}")
        except asyncio.CancelledError:
            raise
        except Exception as err:
            # Not knowing is no reason to stop writing: the chart already refuses a second
            # install, and this check is the second line.
            log.warning("cannot list Leases to look for another install (%s)", err)
            return None
        return installs.judge(leases, self.namespace, time.time_ns())

    async def run(self, write: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Runs `write` while this install may write, and stops it while an older one is live."""
        task: asyncio.Task[None] | None = None
        deferred_to: str | None = None
        try:
            while True:
                verdict = await self.verdict()
                if verdict is not None:
                    self.report(tuple(c.describe(self.lease) for c in verdict.others))
                if verdict is not None and verdict.defer_to is not None:
                    older = verdict.defer_to.describe(self.lease)
                    if older != deferred_to:
                        log.error(
                            "another schedpolicy install is live in %s and is older: this one"
                            " writes nothing while it runs (one install per cluster)",
                            older,
                        )
                        deferred_to = older
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
                        task = None
                elif task is None or task.done():
                    if deferred_to is not None:
                        log.info("no older schedpolicy install is live any more; writing")
                        deferred_to = None
                    task = asyncio.create_task(write(), name="writers")
                await asyncio.sleep(self.interval)
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
