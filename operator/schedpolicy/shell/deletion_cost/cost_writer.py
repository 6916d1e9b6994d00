"""Writes one pod's deletion cost, and reacts to how that went.

The reconciler decides which pods to write and when; this sends the write through
kube.py and keeps what the next decision needs: when each pod was last written (the rate
limit), which writes await their echo, and which keep failing and why (the status).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from schedpolicy.core.deletion_cost import karpenter_gate
from schedpolicy.core.deletion_cost.costs import CostPlan
from schedpolicy.shell import metrics
from schedpolicy.shell.clock import Clock
from schedpolicy.shell.echoes import Echoes
from schedpolicy.shell.events import Events
from schedpolicy.shell.kube import Kube, ObjectRef
from schedpolicy.shell.kube_errors import Forbidden, Gone, KubeError, PreconditionFailed, Transient
from schedpolicy.view.cluster import Affected, ClusterView, PodRecord

log = logging.getLogger("schedpolicy.reconciler")

# Retries every 2 s, so about 10 s of an unavailable apiserver before a pod says so.
TRANSIENT_FAILURES_BEFORE_EVENT = 5
TRANSIENT_RETRY_SECONDS = 2.0
FORBIDDEN_RETRY_SECONDS = 30.0


class CostWriter:
    def __init__(
        self,
        kube: Kube,
        view: ClusterView,
        events: Events,
        *,
        replan: Callable[[PodRecord], CostPlan],
        retry: Callable[[str, float], None],
        failures_changed: Callable[[], None],
        clock: Clock,
    ) -> None:
        self.kube, self.view, self.events = kube, view, events
        self.replan, self.retry, self.failures_changed = replan, retry, failures_changed
        self.clock = clock
        self.echoes: Echoes[str] = Echoes()
        self.last_write: dict[str, float] = {}
        # Per pod UID: (policy, why) of a write refused for good, shown in the status.
        self.failures: dict[str, tuple[str | None, str]] = {}
        self._transient: dict[str, int] = {}  # consecutive retried failures per pod UID
        # Per pod UID: the cost we last removed (or are removing), so that its going is
        # not taken for another writer's deletion (core/deletion_cost/karpenter_gate.py).
        self.removed: dict[str, str] = {}
        self._gate_told = False

    def gone(self, uid: str) -> None:
        self.echoes.forget(uid)
        self.last_write.pop(uid, None)
        self.failures.pop(uid, None)
        self._transient.pop(uid, None)
        self.removed.pop(uid, None)

    def watch_gate(self, pod: PodRecord, before: PodRecord | None) -> Affected:
        """Karpenter's deletion-cost gate is seen when it writes pod-deletion-cost (the view
        sees that itself) or deletes one of ours; said once, with what every pod of a
        Karpenter node must be planned again for."""
        gate = self.view.karpenter_gate
        affected = Affected()
        if gate.sighting is None and before is not None:
            node = self.view.nodes.get(pod.node_name) if pod.node_name else None
            sighting = karpenter_gate.deleted(
                f"{pod.namespace}/{pod.name}",
                (before.cost, before.cost_managers),
                pod.cost,
                active=pod.active,
                node=pod.node_name,
                node_labels=node.labels if node is not None else None,
                our_removal=self.removed.get(pod.uid),
            )
            gate.see(sighting)
        if gate.sighting is not None and not self._gate_told:
            self._gate_told = True
            affected.all_pods = True
            log.info(
                "Karpenter's deletion-cost gate is on (%s): pod-deletion-cost on the pods of"
                " Karpenter nodes is left to it from now on",
                gate.sighting.describe(),
            )
        return affected

    async def write(self, uid: str) -> None:
        pod = self.view.pods.get(uid)
        if pod is None:
            return
        # Plan again: the view may have moved on since this pod was queued.
        plan = self.replan(pod)
        if plan.action == "none" or (plan.value is None and plan.karpenter is None):
            return
        previous = self.last_write.get(uid)
        self.last_write[uid] = self.clock.monotonic()
        try:
            if plan.action == "write":
                if plan.value is not None:
                    self.removed.pop(uid, None)
                version = await self.kube.set_pod_cost(
                    pod.namespace,
                    pod.name,
                    pod.uid,
                    plan.value,
                    has_annotations=pod.has_annotations,
                    resource_version=pod.resource_version,
                    karpenter=plan.karpenter,
                )
            else:
                assert plan.value is not None
                self.removed[uid] = plan.value
                version = await self.kube.remove_pod_cost(
                    pod.namespace, pod.name, pod.uid, plan.value, plan.karpenter
                )
        except (Gone, PreconditionFailed) as err:
            # The pod is gone, or the name now belongs to another pod, or the value moved
            # under us: the watch will tell; nothing was written.
            metrics.COST_WRITES.labels(
                result="not-found" if isinstance(err, Gone) else "conflict"
            ).inc()
            # Nothing was written, so the interval between writes does not start: a pod whose
            # version moved under the write (KWOK or the kubelet reporting it Running, in
            # the same second it was bound) gets its first cost once the watch shows the new
            # version, not minUpdateIntervalSeconds later.
            if previous is None:
                self.last_write.pop(uid, None)
            else:
                self.last_write[uid] = previous
            return
        except KubeError as err:
            metrics.COST_WRITES.labels(result="error").inc()
            await self._refused(pod, plan, err)
            return
        metrics.COST_WRITES.labels(result="removed" if plan.action == "remove" else "ok").inc()
        self.failures.pop(uid, None)
        self._transient.pop(uid, None)
        value = plan.value if plan.action == "write" else None
        seen = self.view.pods.get(uid)
        self.echoes.wrote(uid, version, value, seen.resource_version if seen else None)

    async def _refused(self, pod: PodRecord, plan: CostPlan, err: KubeError) -> None:
        if isinstance(err, Transient):
            # Throttled or unavailable: try again, and say so once it persists.
            if not err.status:
                log.warning(
                    "writing the cost of pod %s failed (%s); retrying", pod.uid, err.__cause__
                )
            await self.transient_failure(pod.uid, str(err))
            return
        self.failures[pod.uid] = (plan.policy, str(err))
        self.failures_changed()
        if isinstance(err, Forbidden):
            # An apiserver that has just started refuses for a moment while its authorizer
            # warms up, and an admin may fix RBAC later: look again, slowly.
            self.retry(pod.uid, FORBIDDEN_RETRY_SECONDS)
        await self._warn(pod, f"writing pod-deletion-cost failed: {err}")

    async def transient_failure(self, uid: str, why: str) -> None:
        """Retry a write that failed for a passing reason; one Event when it keeps failing."""
        self.retry(uid, TRANSIENT_RETRY_SECONDS)
        failures = self._transient[uid] = self._transient.get(uid, 0) + 1
        pod = self.view.pods.get(uid)
        if failures == TRANSIENT_FAILURES_BEFORE_EVENT and pod is not None:
            await self._warn(
                pod, f"writing pod-deletion-cost failed {failures} times in a row ({why}); retrying"
            )

    async def _warn(self, pod: PodRecord, message: str) -> None:
        ref = ObjectRef("v1", "Pod", pod.name, pod.uid, pod.namespace)
        await self.events.warn(ref, "CostWriteFailed", message)
