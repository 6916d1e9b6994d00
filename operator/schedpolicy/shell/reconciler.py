"""The write loop: which pods and nodes to look at, and when. It decides nothing itself.

Watch feeds update the ClusterView and report what a change touched. This loop wakes up,
plans exactly the pods and nodes affected with the pure core, asks the write gate
(core/deletion_cost/write_gate.py) what to do with each plan, and queues the writes for a
small pool of workers: the cost writer, the label writer and the status writer do the I/O.
One writer side makes ordering, deduplication, rate limits and leader election simple.

Nothing is decided before the view is synced (every watched kind listed and indexed):
deciding on a partial view would write costs that the rest of the listing then changes,
or remove costs whose policy has not been seen yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from schedpolicy.core.deletion_cost import costs, karpenter_gate, write_gate
from schedpolicy.core.placement.routing import Route
from schedpolicy.shell import heap, metrics
from schedpolicy.shell.clock import Clock
from schedpolicy.shell.deletion_cost.cost_writer import CostWriter
from schedpolicy.shell.events import Events
from schedpolicy.shell.gpu.label_sync import LabelSync
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.status_writer import StatusWriter
from schedpolicy.shell.write_queue import WriteQueue
from schedpolicy.view import reports
from schedpolicy.view.cluster import Affected, ClusterView, NodeRecord, PodRecord
from schedpolicy.view.deletion_cost import decisions
from schedpolicy.view.deletion_cost.decisions import PodOutcome
from schedpolicy.view.dirty import Dirty
from schedpolicy.view.records import only_cost_changed

log = logging.getLogger("schedpolicy.reconciler")

# Reasons for not writing that are worth counting (the rest are the normal steady state).
_COUNTED_SKIPS = ("foreign-cost", "rate-limited", karpenter_gate.PLAN_REASON)
# How often at most the pods waiting on a policy's scheduler are looked over.
PENDING_CHECK_SECONDS = 1.0
# A status report reads every pod: at 150k pods it takes most of a second of CPU, and at a
# fixed 2 s interval it took two thirds of the controller while 30k cost writes waited (B8's
# drain, bench/profiles/b8-churn-controller.txt). Reports get at most this share of the time.
STATUS_SHARE = 0.1
# Planning a whole cluster takes a while; the webhook and the watch streams get the loop
# back after this many pods.
_PLAN_SLICE = 200


def status_gap(interval: float, took: float) -> float:
    """Seconds from the start of one status report to the next: the configured interval, or
    longer, so that reports (`took` seconds the last time) keep to STATUS_SHARE of the time."""
    return max(interval, took / STATUS_SHARE)


@dataclass
class StatusPace:
    """When the next policy status report may start."""

    interval: float
    last: float = -1e9
    gap: float = 0.0  # 0 until the first report: the interval alone

    def wait(self, now: float) -> float:
        return self.last + max(self.gap, self.interval) - now

    def ran(self, started: float, ended: float) -> None:
        self.last, self.gap = started, status_gap(self.interval, ended - started)


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        view: ClusterView,
        *,
        concurrency: int = 16,
        debounce: float = 0.2,
        status_interval: float = 2.0,
        pending_threshold: float = 60.0,
        clock: Clock | None = None,
        admitted_prefixes: frozenset[str] | None = None,
    ) -> None:
        self.view = view
        self.concurrency = concurrency
        self.debounce = debounce
        self.status_pace = StatusPace(status_interval)
        self.pending_threshold = pending_threshold
        self.clock = clock or Clock()
        self.synced = asyncio.Event()
        self._wake = asyncio.Event()
        events = Events(kube)
        self.labels = LabelSync(kube, view, events, self._status_dirty, admitted_prefixes)
        self.costs = CostWriter(
            kube,
            view,
            events,
            replan=lambda pod: decisions.pod_cost(view, pod, self.clock.wall()).plan,
            retry=lambda uid, seconds: self.queue.retry_in(uid, seconds),
            failures_changed=self._status_dirty,
            clock=self.clock,
        )
        self.queue = WriteQueue(self.costs, self.labels, view.policies, self.changed)
        self.statuses = StatusWriter(kube, events)
        self.outcomes: dict[str, PodOutcome] = {}
        self._governed: dict[frozenset[str], frozenset[str]] = {}
        # What to look at on the next pass.
        self.dirty = Dirty()
        self._counts_dirty = False
        self._stuck: dict[str, list[reports.Problem]] = {}
        self._other_installs: tuple[str, ...] = ()
        # Which admission path serves each placement policy (admission_sync.py sets it).
        self.admission: Mapping[str, Route] = {}
        self._next_pending_check = -1e9

    # ---- what the feeds and handlers call ------------------------------------------------

    def mark_synced(self) -> None:
        if not self.synced.is_set():
            sizes = (len(self.view.pods), len(self.view.nodes), len(self.view.policies()))
            log.info("view synced: %d pods, %d nodes, %d policies", *sizes)
            self.synced.set()
            self._wake.set()
            heap.settle()

    def policies_changed(self) -> None:
        self.dirty.everything()
        self._status_dirty()

    def status_changed(self) -> None:
        self._status_dirty()

    def set_other_installs(self, others: tuple[str, ...]) -> None:
        """Live controllers of other installs, as the install guard saw them last."""
        if others != self._other_installs:
            self._other_installs = others
            self._status_dirty()

    def changed(self, affected: Affected) -> None:
        self.dirty.add(affected)
        self._wake.set()

    def pod_seen(self, pod: PodRecord, before: PodRecord | None = None) -> bool:
        """Forget what we wrote once the watch shows it (or anything newer).

        True when this event is only our own write coming back (`before` is the record it
        replaced): nothing the plan read has moved, so the pod need not be planned again.
        Planning every echo would double the controller's work on a cold start.
        """
        written = self.costs.echoes.seen(pod.uid, pod.resource_version)
        if written is None or before is None:
            return False
        if pod.cost != written.value or not only_cost_changed(before, pod):
            return False
        outcome = self.outcomes.get(pod.uid)
        if outcome is not None and outcome.stored != pod.cost:
            self.outcomes[pod.uid] = replace(outcome, stored=pod.cost)
            self._status_dirty()
        return True

    def node_seen(self, node: NodeRecord) -> None:
        self.labels.node_seen(node)

    def node_gone(self, name: str) -> None:
        self.labels.node_gone(name)
        self._counts_dirty = True

    def pod_gone(self, uid: str) -> None:
        self.costs.gone(uid)
        self.outcomes.pop(uid, None)
        self.queue.cancel(uid)
        self._counts_dirty = True

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        workers = [
            asyncio.create_task(self.queue.work(), name=f"writer-{i}")
            for i in range(self.concurrency)
        ]
        try:
            await self.synced.wait()
            self._start_term()
            while True:
                # Wake up now and then even without events: pods waiting on a dead
                # scheduler produce none.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=5)
                # Let a burst of events (a rollout, a kubectl apply -f dir/) settle.
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
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def _start_term(self) -> None:
        """Forget what an earlier term believed it wrote: another leader may have written
        since. Everything is looked at again, and only real differences are written."""
        self.costs.echoes.clear()
        self.statuses.forget_writes()
        self.labels.forget_writes()
        self.policies_changed()

    async def reconcile_once(self) -> None:
        started = time.perf_counter()
        label_nodes = self.dirty.take_label_nodes(self.view)
        await self._plan_pods(self.dirty.take_pods(self.view))
        await self._plan_nodes(label_nodes)
        if self.clock.monotonic() >= self._next_pending_check:
            # A report about pods waiting a minute need not be redone on every event burst.
            self._next_pending_check = self.clock.monotonic() + PENDING_CHECK_SECONDS
            self._check_pending()
        metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)
        if self._counts_dirty:
            wait = self.status_pace.wait(self.clock.monotonic())
            if wait <= 0:
                self._counts_dirty = False
                report_started = self.clock.monotonic()
                await self.reconcile_policy_statuses()
                self.status_pace.ran(report_started, self.clock.monotonic())
            else:
                asyncio.get_running_loop().call_later(wait, self._wake.set)

    def _status_dirty(self) -> None:
        self._counts_dirty = True
        self._wake.set()

    # ---- planning ------------------------------------------------------------------------

    async def _plan_pods(self, uids: set[str]) -> None:
        if not uids:
            return
        policies = self.view.policies()
        now = self.clock.wall()
        for done, uid in enumerate(uids):
            if done % _PLAN_SLICE == _PLAN_SLICE - 1:
                await asyncio.sleep(0)
            pod = self.view.pods.get(uid)
            if pod is None:
                continue
            result = decisions.pod_cost(self.view, pod, now, policies)
            outcome = decisions.pod_outcome(self.view, result, policies, self._governed)
            if self.outcomes.get(uid) != outcome:
                self._counts_dirty = True
            self.outcomes[uid] = outcome
            self._gate(pod, result.plan)

    def _gate(self, pod: PodRecord, plan: costs.CostPlan) -> None:
        written = self.costs.echoes.pending(pod.uid)
        target = plan.value if plan.action == "write" else None
        gate = write_gate.cost_gate(
            plan,
            awaiting_echo=written is not None and written.value == target,
            in_flight=pod.uid in self.queue.in_flight,
            last_write=self.costs.last_write.get(pod.uid),
            interval=write_gate.min_interval(self.view.policy(plan.policy)),
            now=self.clock.monotonic(),
        )
        if gate.verdict == "idle":
            if plan.reason in _COUNTED_SKIPS or plan.label.startswith("held-"):
                metrics.COST_SKIPPED.labels(reason=plan.label).inc()
            if plan.decision is not None and plan.decision.hold is not None:
                metrics.SAMPLES_REJECTED.labels(reason=plan.decision.hold.reason).inc()
        elif gate.verdict == "busy":
            self.queue.recheck(pod.uid)
        elif gate.verdict == "wait":
            assert gate.not_before is not None
            metrics.COST_SKIPPED.labels(reason="rate-limited").inc()
            self.queue.retry_in(pod.uid, gate.not_before - self.clock.monotonic())
        elif gate.verdict == "write":
            self.queue.pod(pod.uid, first=write_gate.first_in_line(plan, pod.cost))

    async def _plan_nodes(self, names: set[str]) -> None:
        if not names:
            return
        policies = self.view.policies()
        for name in sorted(names):
            before = self.labels.outcomes.get(name)
            if self.labels.refresh(name, policies):
                self.queue.node(name)
            if self.labels.outcomes.get(name) != before:
                self._counts_dirty = True
            await self.labels.report(name)

    def _check_pending(self) -> None:
        pending = reports.pending_report(
            self.view, self.outcomes, self.clock.wall(), self.pending_threshold
        )
        metrics.set_pending(pending.waiting, set(pending.schedulers))
        if pending.stuck != self._stuck:
            self._stuck = pending.stuck
            self._counts_dirty = True

    # ---- policy status -------------------------------------------------------------------

    async def reconcile_policy_statuses(self) -> None:
        labeled, label_conflicts = self.labels.counts()
        found = reports.Findings(
            cost_failures=self.costs.failures,
            stuck=self._stuck,
            other_installs=self._other_installs,
            labeled=labeled,
            label_conflicts=label_conflicts,
            label_failures=self.labels.failures,
            admitted_prefixes=self.labels.admitted,
        )
        report = reports.status_report(self.view, self.outcomes, found)
        metrics.set_cost_bands(report.cost_bands)
        objects = list(self.view.policy_objects())
        observed = reports.observations(objects, report, self.view.policies(), self.admission)
        await self.statuses.write_all(objects, observed, self.clock.wall())
