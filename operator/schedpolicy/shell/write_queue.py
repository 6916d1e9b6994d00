"""The writes waiting to go out, and the workers that send them.

Each pod or node is queued at most once; a pod planned again while its write is on the
wire is looked at again once that write returns, never written twice at once. Retries
(a rate limit, a failed write) are timers that put the pod back in front of the planner.

A pod that carries no cost yet goes ahead of the re-costs. Under churn one new pod can
re-cost dozens of others (its node's, its ReplicaSet's zone), and a pod with no cost at
all is the most wrong: it ranks at 0 beside its ReplicaSet's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from schedpolicy.core.policy import matching
from schedpolicy.shell import metrics
from schedpolicy.shell.deletion_cost.cost_writer import CostWriter
from schedpolicy.shell.gpu.label_sync import LabelSync
from schedpolicy.view.cluster import Affected

log = logging.getLogger("schedpolicy.reconciler")

LABEL_RETRY_SECONDS = 2.0
FIRST, NEXT = 0, 1


class WriteQueue:
    def __init__(
        self,
        costs: CostWriter,
        labels: LabelSync,
        policies: Callable[[], list[matching.Policy]],
        changed: Callable[[Affected], None],
    ) -> None:
        self.costs, self.labels = costs, labels
        self.policies, self.changed = policies, changed
        # Work items are "pod:<uid>" or "node:<name>", after their rank (FIRST or NEXT) and
        # their arrival, so that items of one rank leave in the order they came.
        self._queue: asyncio.PriorityQueue[tuple[int, int, str]] = asyncio.PriorityQueue()
        self._arrivals = 0
        self._queued: set[str] = set()
        self.in_flight: set[str] = set()  # pod UIDs
        self._recheck: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        # Read at scrape time: nothing on the hot path pays for the gauge.
        metrics.WRITE_QUEUE_DEPTH.set_function(self._queue.qsize)

    def pod(self, uid: str, first: bool = False) -> None:
        """`first`: ahead of every item queued without it (a pod that carries no cost yet)."""
        self._put(f"pod:{uid}", FIRST if first else NEXT)

    def node(self, name: str) -> None:
        self._put(f"node:{name}", NEXT)

    def recheck(self, uid: str) -> None:
        """Plan this pod again once its write on the wire returns."""
        self._recheck.add(uid)

    def retry_in(self, uid: str, seconds: float) -> None:
        """Plan this pod again in `seconds`, unless a retry is already due sooner or later."""
        if uid not in self._timers:
            self._timers[uid] = asyncio.get_running_loop().call_later(seconds, self._retry, uid)

    def has_retry(self, uid: str) -> bool:
        return uid in self._timers

    def cancel(self, uid: str) -> None:
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer.cancel()

    def _put(self, key: str, rank: int) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._arrivals += 1
            self._queue.put_nowait((rank, self._arrivals, key))

    def _retry(self, uid: str) -> None:
        self._timers.pop(uid, None)
        self.changed(Affected(pods={uid}))

    async def work(self) -> None:
        """One worker: run as many as the writes that may be in flight at once."""
        while True:
            _, _, key = await self._queue.get()
            self._queued.discard(key)
            kind, _, name = key.partition(":")
            if kind == "node":
                await self._write_node(name)
            else:
                await self._write_pod(name)

    async def _write_node(self, name: str) -> None:
        try:
            await self.labels.write(name, self.policies())
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("writing the labels of node %s failed (%s); retrying", name, err)
            asyncio.get_running_loop().call_later(
                LABEL_RETRY_SECONDS, self.changed, Affected(label_nodes={name})
            )

    async def _write_pod(self, uid: str) -> None:
        self.in_flight.add(uid)
        try:
            await self.costs.write(uid)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            # Not an answer from the apiserver (kube.py maps those): nothing was written, as
            # the UID test guards the rest, so look at this pod again shortly.
            log.warning("writing the cost of pod %s failed (%s); retrying", uid, err)
            metrics.COST_WRITES.labels(result="error").inc()
            await self.costs.transient_failure(uid, type(err).__name__)
        finally:
            self.in_flight.discard(uid)
            if uid in self._recheck:
                self._recheck.discard(uid)
                self.changed(Affected(pods={uid}))
