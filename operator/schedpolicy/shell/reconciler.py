"""The write side of the operator: turns the view into decisions and decisions into writes.

Watch handlers only update the ClusterView and report what a change touched;
this loop wakes up, recomputes exactly the pods affected with the pure core, and
hands the differences to kube.py through a small pool of writers. One writer
side makes ordering, deduplication, rate limits and leader election simple.

Nothing is decided before the view is synced (every watched kind listed and
indexed): deciding on a partial view would write costs that the rest of the
listing then changes, or remove costs whose policy has not been seen yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from schedpolicy.core import api, costs, matching, timestamps, wellknown
from schedpolicy.core.policy_status import (
    Counts,
    Observation,
    desired_status,
    needs_write,
    transitions,
)
from schedpolicy.core.wording import count, pending_message
from schedpolicy.shell import heap, metrics
from schedpolicy.shell.kube import Kube, ObjectRef, cost_patch, cost_removal_patch
from schedpolicy.shell.label_sync import LabelSync
from schedpolicy.view import decisions
from schedpolicy.view.cluster import Affected, ClusterView, NodeRecord, PodRecord, PolicyObject
from schedpolicy.view.records import only_cost_changed

log = logging.getLogger("schedpolicy.reconciler")

# Conditions in these states are worth a Warning Event; any other transition is Normal.
_WARNING = {("Ready", "False"), ("Conflicting", "True"), ("Degraded", "True")}
# Reasons for not writing that are worth counting (the rest are the normal steady state).
_COUNTED_SKIPS = ("foreign-cost", "rate-limited")
# How often at most the pods waiting on a policy's scheduler are looked over.
PENDING_CHECK_SECONDS = 1.0
# Retries every 2 s, so about 10 s of an unavailable apiserver before a pod says so.
TRANSIENT_FAILURES_BEFORE_EVENT = 5
FORBIDDEN_RETRY_SECONDS = 30.0


def _now() -> str:
    return timestamps.render(datetime.now(UTC))


def _age(created: str, now: datetime) -> float:
    return timestamps.seconds_since(created, now) or 0.0


def _rv(value: str) -> int:
    return int(value) if value.isdigit() else -1


@dataclass(frozen=True, slots=True)
class PodOutcome:
    """The last plan for a pod, reduced to what status counts need (explain recomputes
    the full decision on demand; keeping it for every pod would cost memory)."""

    governed_by: frozenset[str]  # policies governing the pod for any pod capability
    cost_policy: str | None
    final: int | None  # the cost decided, if any
    stored: str | None  # the cost on the pod when the plan was made


@dataclass(frozen=True, slots=True)
class Written:
    value: str | None  # None: we removed it
    resource_version: str


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
        now: Callable[[], str] = _now,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.view = view
        self.concurrency = concurrency
        self.debounce = debounce
        self.status_interval = status_interval
        self.pending_threshold = pending_threshold
        self._stuck: dict[str, list[tuple[str, str]]] = {}  # policy -> (reason, message)
        self.now = now
        self.clock = clock
        self.synced = asyncio.Event()
        self._wake = asyncio.Event()
        self._policies_dirty = True
        self._all_pods_dirty = True
        self._all_nodes_dirty = True
        self._dirty = Affected()
        self.labels = LabelSync(kube, view, self._post_warning)
        # Work items are "pod:<uid>" or "node:<name>".
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._inflight: set[str] = set()
        self._recheck: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._last_write: dict[str, float] = {}
        self._written: dict[str, Written] = {}
        self._failures: dict[str, tuple[str | None, str]] = {}
        self._transient: dict[str, int] = {}  # consecutive retried failures per pod UID
        self.outcomes: dict[str, PodOutcome] = {}
        self._governed: dict[frozenset[str], frozenset[str]] = {}
        self._counts_dirty = False
        self._other_installs: tuple[str, ...] = ()
        self._last_status = -1e9
        self._next_pending_check = -1e9
        # What we last wrote, so that a write is not repeated before its watch event arrives.
        self._written_status: dict[str, dict[str, Any]] = {}

    # ---- what the handlers call ----------------------------------------------------------

    def _start_term(self) -> None:
        """Forget what an earlier term believed it wrote: another leader may have written
        since. Everything is looked at again, and only real differences are written."""
        self._written.clear()
        self._written_status.clear()
        self.labels.forget_writes()
        self._policies_dirty = self._all_pods_dirty = self._all_nodes_dirty = True
        self._counts_dirty = True
        self._wake.set()

    def mark_synced(self) -> None:
        if not self.synced.is_set():
            log.info(
                "view synced: %d pods, %d nodes, %d policies",
                len(self.view.pods),
                len(self.view.nodes),
                len(self.view.policies()),
            )
            self.synced.set()
            self._wake.set()
            heap.settle()

    def policies_changed(self) -> None:
        self._policies_dirty = True
        self._all_pods_dirty = True
        self._all_nodes_dirty = True
        self._wake.set()

    def status_changed(self) -> None:
        self._counts_dirty = True
        self._wake.set()

    def set_other_installs(self, others: tuple[str, ...]) -> None:
        """Live controllers of other installs, as the instance guard saw them last."""
        if others != self._other_installs:
            self._other_installs = others
            self._counts_dirty = True
            self._wake.set()

    def changed(self, affected: Affected) -> None:
        self._dirty.merge(affected)
        self._wake.set()

    def pod_seen(self, pod: PodRecord, before: PodRecord | None = None) -> bool:
        """Forget what we wrote once the watch shows it (or anything newer).

        True when this event is only our own write coming back (`before` is the record it
        replaced): nothing the plan read has moved, so the pod need not be planned again.
        Planning every echo would double the controller's work on a cold start.
        """
        written = self._written.get(pod.uid)
        if written is None or _rv(pod.resource_version) < _rv(written.resource_version):
            return False
        del self._written[pod.uid]
        if before is None or pod.cost != written.value or not only_cost_changed(before, pod):
            return False
        outcome = self.outcomes.get(pod.uid)
        if outcome is not None and outcome.stored != pod.cost:
            self.outcomes[pod.uid] = replace(outcome, stored=pod.cost)
            self._counts_dirty = True
            self._wake.set()
        return True

    def node_seen(self, node: NodeRecord) -> None:
        self.labels.node_seen(node)

    def node_gone(self, name: str) -> None:
        self.labels.node_gone(name)
        self._counts_dirty = True

    def pod_gone(self, uid: str) -> None:
        self._written.pop(uid, None)
        self._last_write.pop(uid, None)
        self._failures.pop(uid, None)
        self._transient.pop(uid, None)
        self.outcomes.pop(uid, None)
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer.cancel()
        self._counts_dirty = True

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        workers = [
            asyncio.create_task(self._writer(), name=f"cost-writer-{i}")
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

    async def reconcile_once(self) -> None:
        if self._policies_dirty:
            self._policies_dirty = False
            self._counts_dirty = True
        started = time.perf_counter()
        label_nodes = self._dirty_label_nodes()
        await self._plan_dirty_pods()
        await self._plan_nodes(label_nodes)
        if self.clock() >= self._next_pending_check:
            # A report about pods waiting a minute need not be redone on every event burst.
            self._next_pending_check = self.clock() + PENDING_CHECK_SECONDS
            self._check_pending()
        metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)
        if self._counts_dirty:
            wait = self._last_status + self.status_interval - self.clock()
            if wait <= 0:
                self._counts_dirty = False
                self._last_status = self.clock()
                await self.reconcile_policy_statuses()
            else:
                asyncio.get_running_loop().call_later(wait, self._wake.set)

    # ---- deletion cost -------------------------------------------------------------------

    # ---- pods waiting on a policy's scheduler ----------------------------------------------

    def _check_pending(self) -> None:
        """Report pods a policy handed to its scheduler that are still unscheduled.

        A pod the scheduler looked at carries PodScheduled=False (no room); a pod with no
        PodScheduled condition at all was never looked at, which is what a dead
        secondary scheduler looks like.
        """
        policies = {p.name: p for p in self.view.policies() if p.spec.placement is not None}
        schedulers = {
            p.spec.placement.scheduler_name for p in policies.values() if p.spec.placement
        }
        now = datetime.now(UTC)
        waiting: Counter[str] = Counter()
        stuck: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for uid in self.view.unbound:
            pod, outcome = self.view.pods.get(uid), self.outcomes.get(uid)
            if pod is None or outcome is None or not pod.active:
                continue
            if (
                pod.scheduler_name not in schedulers
                or _age(pod.created, now) < self.pending_threshold
            ):
                continue
            waiting[pod.scheduler_name] += 1
            for name in outcome.governed_by:
                placement = policies[name].spec.placement if name in policies else None
                if placement is not None and placement.scheduler_name == pod.scheduler_name:
                    seen = "PodScheduled" in pod.conditions
                    reason = "PodsUnschedulable" if seen else "SchedulerNotScheduling"
                    stuck[name][reason].append(f"{pod.namespace}/{pod.name}")
        metrics.set_pending(waiting, schedulers)
        report: dict[str, list[tuple[str, str]]] = {}
        limit = int(self.pending_threshold)
        for name, by_reason in stuck.items():
            scheduler = policies[name].spec.placement.scheduler_name  # type: ignore[union-attr]
            report[name] = []
            for reason, pods in sorted(by_reason.items(), reverse=True):
                report[name].append((reason, pending_message(reason, pods, scheduler, limit)))
        if report != self._stuck:
            self._stuck = report
            self._counts_dirty = True

    # ---- node labels ---------------------------------------------------------------------

    def _dirty_label_nodes(self) -> set[str]:
        if self._all_nodes_dirty:
            self._all_nodes_dirty = False
            self._dirty.label_nodes.clear()
            return self.view.node_names()
        names, self._dirty.label_nodes = self._dirty.label_nodes, set()
        return names

    async def _plan_nodes(self, names: set[str]) -> None:
        if not names:
            return
        policies = self.view.policies()
        for name in sorted(names):
            before = self.labels.outcomes.get(name)
            if self.labels.refresh(name, policies):
                self._enqueue(f"node:{name}")
            if self.labels.outcomes.get(name) != before:
                self._counts_dirty = True
            await self.labels.report(name)

    # ---- deletion cost -------------------------------------------------------------------

    def _dirty_pod_uids(self) -> set[str]:
        dirty = self._dirty
        self._dirty = Affected(label_nodes=dirty.label_nodes)
        if self._all_pods_dirty or dirty.all_pods:
            self._all_pods_dirty = False
            return set(self.view.pods)
        uids = set(dirty.pods)
        for node in dirty.nodes:
            uids |= self.view.pods_by_node.get(node, set())
        for rs in dirty.replicasets:
            uids |= self.view.pods_by_replicaset.get(rs, set())
        return uids

    async def _plan_dirty_pods(self) -> None:
        uids = self._dirty_pod_uids()
        if not uids:
            return
        policies = self.view.policies()
        now = datetime.now(UTC)
        for done, uid in enumerate(uids):
            if done % 200 == 199:
                # Planning a whole cluster takes a while; let the webhook and the watch
                # streams have the loop in between.
                await asyncio.sleep(0)
            pod = self.view.pods.get(uid)
            if pod is None:
                continue
            outcome, plan = self.plan_pod(pod, policies, now)
            previous = self.outcomes.get(uid)
            self.outcomes[uid] = outcome
            if previous != outcome:
                self._counts_dirty = True
            self._act(pod, plan)

    def plan_pod(
        self, pod: PodRecord, policies: list[matching.Policy], now: datetime
    ) -> tuple[PodOutcome, costs.CostPlan]:
        result = decisions.pod_cost(self.view, pod, now, policies)
        ns_labels = self.view.namespaces.get(pod.namespace, {})
        placement = matching.governing_policy(policies, "placement", pod.labels, ns_labels)
        governed = frozenset(m.policy.name for m in (result.match, placement) if m.policy)
        governed = self._governed.setdefault(governed, governed)  # one copy of each set
        policy = result.match.policy
        final = result.decision.final if result.decision is not None else None
        outcome = PodOutcome(governed, policy.name if policy else None, final, pod.cost)
        return outcome, result.plan

    def _act(self, pod: PodRecord, plan: costs.CostPlan) -> None:
        if plan.action == "none":
            if plan.reason in _COUNTED_SKIPS or plan.reason.startswith("held-"):
                metrics.COST_SKIPPED.labels(reason=plan.reason).inc()
            if plan.decision is not None and plan.decision.hold is not None:
                metrics.SAMPLES_REJECTED.labels(reason=plan.decision.hold.reason).inc()
            return
        written = self._written.get(pod.uid)
        if written is not None and written.value == (
            plan.value if plan.action == "write" else None
        ):
            return  # already sent; waiting for the watch to show it
        if pod.uid in self._inflight:
            self._recheck.add(pod.uid)
            return
        interval = self._min_interval(plan.policy)
        due = self._last_write.get(pod.uid, -1e9) + interval
        if due > self.clock():
            metrics.COST_SKIPPED.labels(reason="rate-limited").inc()
            if pod.uid not in self._timers:
                self._timers[pod.uid] = asyncio.get_running_loop().call_later(
                    due - self.clock(), self._retry, pod.uid
                )
            return
        self._enqueue(f"pod:{pod.uid}")

    def _enqueue(self, key: str) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _retry(self, uid: str) -> None:
        self._timers.pop(uid, None)
        self.changed(Affected(pods={uid}))

    def _retry_in(self, uid: str, seconds: float) -> None:
        if uid not in self._timers:
            self._timers[uid] = asyncio.get_running_loop().call_later(seconds, self._retry, uid)

    def _min_interval(self, policy_name: str | None) -> float:
        for policy in self.view.policies():
            if policy.name == policy_name and policy.spec.deletion_cost is not None:
                return float(policy.spec.deletion_cost.min_update_interval_seconds)
        return 0.0

    async def _writer(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            kind, _, name = key.partition(":")
            if kind == "node":
                try:
                    await self.labels.write(name, self.view.policies())
                except asyncio.CancelledError:
                    raise
                except Exception as err:
                    log.warning("writing the labels of node %s failed (%s); retrying", name, err)
                    asyncio.get_running_loop().call_later(
                        2.0, self.changed, Affected(label_nodes={name})
                    )
                continue
            self._inflight.add(name)
            try:
                await self._write(name)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                # The apiserver is unreachable or answered oddly: nothing was written (the
                # UID test guards the rest), so look at this pod again shortly.
                log.warning("writing the cost of pod %s failed (%s); retrying", name, err)
                metrics.COST_WRITES.labels(result="error").inc()
                await self._transient_failure(name, type(err).__name__)
            finally:
                self._inflight.discard(name)
                if name in self._recheck:
                    self._recheck.discard(name)
                    self.changed(Affected(pods={name}))

    async def _write(self, uid: str) -> None:
        pod = self.view.pods.get(uid)
        if pod is None:
            return
        # Plan again: the view may have moved on since this pod was queued.
        _, plan = self.plan_pod(pod, self.view.policies(), datetime.now(UTC))
        if plan.action == "none":
            return
        if plan.action == "write":
            assert plan.value is not None
            patch = cost_patch(
                pod.uid,
                plan.value,
                has_annotations=pod.has_annotations,
                resource_version=pod.resource_version,
            )
        else:
            assert plan.value is not None
            patch = cost_removal_patch(pod.uid, plan.value)
        self._last_write[uid] = self.clock()
        try:
            stored = await self.kube.patch_pod(pod.namespace, pod.name, patch)
        except ApiException as err:
            if err.status in (404, 422):
                # The pod is gone, or the name now belongs to another pod, or the value
                # moved under us: the watch will tell; nothing was written.
                result = "not-found" if err.status == 404 else "conflict"
                metrics.COST_WRITES.labels(result=result).inc()
                return
            metrics.COST_WRITES.labels(result="error").inc()
            if err.status == 429 or err.status >= 500:
                # Throttled or unavailable: try again, and say so once it persists.
                await self._transient_failure(uid, f"{err.status} {err.reason}")
                return
            self._failures[uid] = (plan.policy, f"{err.status} {err.reason}")
            self._counts_dirty = True
            if err.status in (401, 403):
                # An apiserver that has just started refuses for a moment while its
                # authorizer warms up, and an admin may fix RBAC later: look again, slowly.
                self._retry_in(uid, FORBIDDEN_RETRY_SECONDS)
            await self._warn(
                pod,
                "CostWriteFailed",
                f"writing pod-deletion-cost failed: {err.status} {err.reason}",
            )
            return
        metrics.COST_WRITES.labels(result="removed" if plan.action == "remove" else "ok").inc()
        self._failures.pop(uid, None)
        self._transient.pop(uid, None)
        version = str(stored.get("metadata", {}).get("resourceVersion", ""))
        seen = self.view.pods.get(uid)
        if seen is None or _rv(seen.resource_version) < _rv(version):  # echo not seen yet
            self._written[uid] = Written(plan.value if plan.action == "write" else None, version)

    async def _transient_failure(self, uid: str, why: str) -> None:
        """Retry a write that failed for a passing reason; one Event when it keeps failing."""
        self._retry_in(uid, 2.0)
        failures = self._transient[uid] = self._transient.get(uid, 0) + 1
        pod = self.view.pods.get(uid)
        if failures == TRANSIENT_FAILURES_BEFORE_EVENT and pod is not None:
            await self._warn(
                pod,
                "CostWriteFailed",
                f"writing pod-deletion-cost failed {failures} times in a row ({why}); retrying",
            )

    async def _warn(self, pod: PodRecord, reason: str, message: str) -> None:
        ref = ObjectRef("v1", "Pod", pod.name, pod.uid, pod.namespace)
        await self._post_warning(ref, reason, message)

    async def _post_warning(self, ref: ObjectRef, reason: str, message: str) -> None:
        # Best effort: an Event that cannot be posted (often for the very outage it reports)
        # must never take the writer down with it.
        try:
            await self.kube.emit_event(ref, "Warning", reason, message)
        except Exception as err:
            log.warning("could not post event on %s %s: %s", ref.kind, ref.name, err)

    # ---- policy status -------------------------------------------------------------------

    def _counts(self) -> tuple[dict[str, Counts], dict[str, list[tuple[str, str]]]]:
        """Per policy: the status counts, and problems as (reason, message)."""
        matched: Counter[str] = Counter()
        costed: Counter[str] = Counter()
        bands: Counter[str] = Counter()
        for uid, outcome in self.outcomes.items():
            pod = self.view.pods.get(uid)
            if pod is None:
                continue
            for name in outcome.governed_by:
                matched[name] += 1
            final = outcome.final
            if outcome.cost_policy and final is not None and pod.cost == str(final):
                costed[outcome.cost_policy] += 1
            if pod.cost is not None and wellknown.FIELD_MANAGER in pod.cost_managers:
                bands[pod.cost] += 1
        metrics.set_cost_bands(bands)
        failures: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for uid, (failed_policy, message) in self._failures.items():
            if failed_policy is not None:
                failed = self.view.pods.get(uid)
                where = f"{failed.namespace}/{failed.name}" if failed else uid
                failures[failed_policy].append(
                    ("CostWriteFailed", f"writing the cost of {where} failed: {message}")
                )
        for policy_name, stuck in self._stuck.items():
            failures[policy_name] += stuck
        if self._other_installs:
            # First, so that it names the Degraded condition: it outweighs any other problem.
            another = (
                "AnotherInstance",
                "another schedpolicy controller is live in "
                + "; ".join(self._other_installs)
                + ": one install per cluster; this one, the oldest, keeps writing until the"
                " other is removed",
            )
            for policy in self.view.policies():
                failures[policy.name].insert(0, another)
        labeled, label_conflicts = self.labels.counts()
        for policy_name, conflicts in label_conflicts.items():
            failures[policy_name] += [("LabelConflict", c) for c in conflicts]
        counts = {}
        for policy in self.view.policies():
            has_pods = policy.has("deletionCost") or policy.has("placement")
            counts[policy.name] = Counts(
                matched_pods=matched[policy.name] if has_pods else None,
                costed_pods=costed[policy.name] if policy.has("deletionCost") else None,
                labeled_nodes=labeled[policy.name] if policy.has("nodeLabels") else None,
            )
        return counts, failures

    async def reconcile_policy_statuses(self) -> None:
        objects = list(self.view.policy_objects())
        conflicts = matching.conflicts(self.view.policies())
        counts, failures = self._counts()
        live = {o.name for o in objects}
        for name in list(self._written_status):
            if name not in live:
                del self._written_status[name]
        for obj in objects:
            problems = failures.get(obj.name, [])
            shown = [message for _, message in problems[:5]]
            if len(problems) > 5:
                shown.append(f"and {count(len(problems) - 5, 'more problem')}")
            obs = Observation(
                name=obj.name,
                generation=obj.generation,
                spec_error=obj.error,
                conflicts=conflicts.get(obj.name, ()),
                degraded=shown,
                degraded_reason=problems[0][0] if problems else "AsExpected",
                counts=counts.get(obj.name, Counts()),
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
            message = f"{cond['type']}={cond['status']}: {cond['message']}".rstrip(": ")
            try:
                await self.kube.emit_event(ref, kind, cond["reason"], message)
            except Exception as err:  # best effort, as for every Event
                log.warning("could not post event on %s: %s", obj.name, err)
