"""The leader keeps one MutatingAdmissionPolicy (and binding) per compilable placement
policy, and narrows the webhook to the pods the others may select.

What to compile is core/placement/compiler.py; which path serves which policy, and what to
write, is core/admission_routing.py; the writes are kube.py. This loop decides when: on a
policy change, when the instance types the compiled CEL names change, and once a minute
in case someone deleted or edited our objects. Passes are at least `min_interval` apart,
and a pass writes only objects whose digest differs, so the write rate stays bounded
however fast nodes come and go.

Order matters for pods created meanwhile: a policy's MutatingAdmissionPolicy is written
before the webhook stops being called for its pods, and the webhook is widened again
before an object is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from schedpolicy.core.placement import routing
from schedpolicy.core.placement.compiler import Compiled, compile_all
from schedpolicy.core.placement.routing import Mode, Route, Stored
from schedpolicy.shell import metrics
from schedpolicy.shell.kube import AdmissionObjects, Kube
from schedpolicy.shell.kube_errors import Forbidden, Gone, KubeError, Refused
from schedpolicy.view.cluster import ClusterView

log = logging.getLogger("schedpolicy.admission")

WEBHOOK_NAME = "hints.schedpolicy.io"  # the chart's webhook entry


@dataclass(frozen=True)
class AdmissionSettings:
    mode: Mode = "webhook"
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    # The chart's MutatingWebhookConfiguration, whose match condition this narrows (None:
    # not told, so the webhook is called for every pod, as without policies).
    webhook_configuration: str | None = None
    min_interval: float = 2.0
    # How long the apiserver may take to load a policy it stored (its own watch).
    settle: float = 3.0
    resync: float = 60.0
    # A refused write is tried again this soon: what refused it (an admission policy, a
    # quota) may be fixed without any change we could watch.
    retry: float = 10.0
    poll: float = 1.0


class AdmissionSync:
    def __init__(
        self,
        kube: Kube,
        view: ClusterView,
        settings: AdmissionSettings,
        routes_changed: Callable[[Mapping[str, Route]], None],
    ) -> None:
        self.kube, self.view, self.settings = AdmissionObjects(kube), view, settings
        self.routes_changed = routes_changed
        self.routes: dict[str, Route] = {}
        self._wake = asyncio.Event()
        self._inputs: object = None
        self._refused = False
        self._applied: dict[str, float] = {}  # policy -> when its compiled objects were written

    def policies_changed(self) -> None:
        self._wake.set()

    def _fingerprint(self) -> object:
        policies = tuple((p.name, p.uid, p.generation) for p in self.view.policies())
        return policies, self.view.instance_types()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        last = -1e9
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.settings.poll)
            self._wake.clear()
            since = loop.time() - last
            due = (
                since >= self.settings.resync
                or (self._refused and since >= self.settings.retry)
                or self._settled()
            )
            if not due and self._fingerprint() == self._inputs:
                continue
            last = loop.time()
            try:
                await self.sync_once()
            except asyncio.CancelledError:
                raise
            except KubeError as err:
                log.warning("admission policies not synced (%s); retrying", err)
                metrics.ADMISSION_WRITES.labels(kind="sync", result="error").inc()
                last = -1e9
            await asyncio.sleep(self.settings.min_interval)

    def _settled(self) -> bool:
        """A write has settled since it was made: the webhook can be narrowed now. Each is
        forgotten once it has, so it counts once."""
        now = asyncio.get_running_loop().time()
        done = [p for p, at in self._applied.items() if now - at >= self.settings.settle]
        for p in done:
            del self._applied[p]
        return bool(done)

    async def sync_once(self) -> None:
        self._inputs = self._fingerprint()
        policies = self.view.policies()
        outcomes = compile_all(
            policies,
            instance_types=self.view.instance_types(),
            excluded_namespaces=self.settings.excluded_namespaces,
        )
        webhook = await self._webhook()
        if webhook is not None:
            owner = {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "name": str(self.settings.webhook_configuration),
                "uid": webhook[2],
            }
            outcomes = {
                n: routing.owned_by(o, owner) if isinstance(o, Compiled) else o
                for n, o in outcomes.items()
            }
        mode = self.settings.mode
        refused: dict[str, str] = {}
        served = True
        try:
            stored = await self.kube.stored_admission_policies()
        except Gone:
            stored, served = Stored({}, {}), False
        except Forbidden as err:
            # RBAC without the admission rules (an older chart, or webhook mode on a
            # cluster that does not serve them): nothing of ours can be there to remove.
            stored, served = Stored({}, {}), mode == "policy"
            refused = {name: err.reason for name in outcomes}
        plan = (
            routing.plan_sync(outcomes, stored, mode)
            if served and not refused
            else routing.SyncPlan((), ())
        )
        for compiled in plan.apply:
            stored = await self._apply(compiled, stored, refused)
        self._refused = bool(refused)
        routes = routing.routes(outcomes, mode=mode, served=served, stored=stored, refused=refused)
        now = asyncio.get_running_loop().time()
        settling = {p for p, at in self._applied.items() if now - at < self.settings.settle}
        condition = routing.webhook_condition(policies, routes, settling)
        widened = await self._narrow_webhook(webhook, condition)
        # Until the webhook is called for their pods, the old objects serve them better
        # than nothing.
        for name in plan.delete if widened else ():
            await self.kube.delete_admission_policy(name)
            metrics.ADMISSION_WRITES.labels(kind="delete", result="ok").inc()
        if routes != self.routes:
            for name, r in sorted(routes.items()):
                if self.routes.get(name) != r:
                    log.info("policy %s: admission by %s (%s)", name, r.path, r.message)
            self.routes = routes
            metrics.set_admission_routes(Counter((r.path, r.reason) for r in routes.values()))
            self.routes_changed(routes)

    async def _apply(self, compiled: Compiled, stored: Stored, refused: dict[str, str]) -> Stored:
        try:
            await self.kube.apply_admission_policy(compiled)
        except (Refused, Forbidden) as err:
            # Invalid CEL, a size limit, or the admission guard: the apiserver says which.
            refused[compiled.policy] = err.reason
            metrics.ADMISSION_WRITES.labels(kind="apply", result="refused").inc()
            log.warning("MutatingAdmissionPolicy %s refused: %s", compiled.name, err.reason)
            if compiled.name in stored.policies or compiled.name in stored.bindings:
                # An older version must not go on serving a spec that has moved on.
                await self.kube.delete_admission_policy(compiled.name)
            policies = {k: v for k, v in stored.policies.items() if k != compiled.name}
            bindings = {k: v for k, v in stored.bindings.items() if k != compiled.name}
            return Stored(policies, bindings)
        metrics.ADMISSION_WRITES.labels(kind="apply", result="ok").inc()
        self._applied[compiled.policy] = asyncio.get_running_loop().time()
        return replace(
            stored,
            policies={**stored.policies, compiled.name: compiled.digest},
            bindings={**stored.bindings, compiled.name: compiled.digest},
        )

    async def _webhook(self) -> tuple[int, list[dict[str, str]], str] | None:
        """The chart's webhook entry, its match conditions and its configuration's UID; None
        when not told of one, or it is not installed (webhook.enabled=false)."""
        config = self.settings.webhook_configuration
        if config is None:
            return None
        return await self.kube.webhook_match_conditions(config, WEBHOOK_NAME)

    async def _narrow_webhook(
        self, webhook: tuple[int, list[dict[str, str]], str] | None, expression: str | None
    ) -> bool:
        """Set our match condition; False when the apiserver refused it."""
        config = self.settings.webhook_configuration
        if webhook is None or config is None:
            return True
        index, current, _ = webhook
        desired = routing.match_conditions(current, expression)
        if desired == current:
            return True
        try:
            await self.kube.set_webhook_match_conditions(config, WEBHOOK_NAME, index, desired)
        except (Refused, Forbidden) as err:
            metrics.ADMISSION_WRITES.labels(kind="match-condition", result="refused").inc()
            log.warning("webhook %s match condition not set: %s", config, err.reason)
            return False
        metrics.ADMISSION_WRITES.labels(kind="match-condition", result="ok").inc()
        log.info("webhook %s match condition: %s", config, expression or "(every pod)")
        return True
