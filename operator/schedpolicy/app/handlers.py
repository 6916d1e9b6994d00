"""Kopf wiring: the operator's lifecycle, login, and the SchedulingPolicy watch.

Handlers stay thin: they feed the ClusterView and tell the reconciler what changed; all
decisions are in the pure core and all writes in kube.py. Pods, nodes, ReplicaSets and
namespaces are not kopf's: the start-up handler runs our own informers for them
(informer.py, feeds.py).

The policy watch uses `on.event`, which writes nothing back to the watched objects, so
no `kopf.zalando.org/*` annotation or finalizer is ever added anywhere.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from schedpolicy.app.settings import OperatorState
from schedpolicy.core import api
from schedpolicy.core.placement.routing import Route
from schedpolicy.shell import credentials, feeds, kube, metrics
from schedpolicy.shell.deletion_cost.scraper import Scraper
from schedpolicy.shell.events import Events
from schedpolicy.shell.informer import Informer
from schedpolicy.shell.install_guard import InstallGuard
from schedpolicy.shell.leadership import Leadership
from schedpolicy.shell.memory_guard import MemoryGuard, policy_refs
from schedpolicy.shell.persistence import OwnResourceDiffBaseStorage, OwnResourceProgressStorage
from schedpolicy.shell.placement.admission_sync import AdmissionSync
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.shell.sync_barrier import wait_until_synced

registry = kopf.OperatorRegistry()
log = logging.getLogger("schedpolicy")


@kopf.on.startup(registry=registry)
async def start(settings: kopf.OperatorSettings, memo: OperatorState, **_: Any) -> None:
    settings.peering.standalone = True
    settings.posting.enabled = False  # Events are ours to post, through kube.py
    settings.persistence.progress_storage = OwnResourceProgressStorage(
        kopf.AnnotationsProgressStorage(prefix=api.GROUP)
    )
    settings.persistence.diffbase_storage = OwnResourceDiffBaseStorage(
        kopf.AnnotationsDiffBaseStorage(prefix=api.GROUP, key="last-handled-configuration")
    )
    # Page the initial listings, so a large cluster is never held in memory as one response.
    settings.watching.chunk_size = 500
    settings.watching.server_timeout = memo.config.watch_timeout_seconds
    settings.watching.client_timeout = memo.config.watch_timeout_seconds + 30
    # Admission is another process (`schedpolicy webhook`); kopf serves no webhook here.
    settings.admission.managed = None

    metrics.zero_controller_series()
    memo.kube = await kube.Kube.connect(memo.config.credentials, memo.config.identity)
    memo.reconciler = Reconciler(
        memo.kube,
        memo.view,
        concurrency=memo.config.write_concurrency,
        pending_threshold=memo.config.pending_threshold_seconds,
        admitted_prefixes=memo.config.admitted_label_prefixes,
    )
    # Pods, nodes, ReplicaSets and namespaces come through our own informers, not kopf:
    # kopf's per-object worker and JSON decode would cost most of the operator's CPU and
    # memory on a large cluster, and only the policies need its handlers.
    informers = feeds.controller_informers(
        memo.kube, memo.view, memo.reconciler, memo.config.watch_timeout_seconds
    )
    for informer in informers:
        name = f"informer-{informer.resource.kind}"
        memo.tasks.append(asyncio.create_task(informer.run(), name=name))
    memo.tasks.append(asyncio.create_task(_sync(memo, informers), name="sync-barrier"))
    guard = MemoryGuard(
        Events(memo.kube),
        lambda: policy_refs((o.name, o.uid) for o in memo.view.policy_objects()),
        threshold=memo.config.memory_near_ratio,
    )
    memo.tasks.append(asyncio.create_task(guard.run(), name="memory-guard"))
    _lead(memo, memo.reconciler)


def _lead(memo: OperatorState, reconciler: Reconciler) -> None:
    """What only the leader runs: the write loop, the scraper and the admission objects."""
    assert memo.kube is not None
    scraper = Scraper(memo.view, reconciler)

    def routes_changed(routes: Mapping[str, Route]) -> None:
        reconciler.admission = routes
        reconciler.status_changed()

    admission = AdmissionSync(memo.kube, memo.view, memo.config.admission, routes_changed)
    memo.admission = admission

    async def lead() -> None:
        await reconciler.synced.wait()
        await asyncio.gather(reconciler.run(), scraper.run(), admission.run())

    if memo.config.lease is None:
        metrics.set_leader(True)
        memo.tasks.append(asyncio.create_task(lead(), name="reconciler"))
    else:
        # The leader of each install holds a Lease of the same name in its own namespace:
        # while an older install's is live, this one writes nothing.
        guard = InstallGuard(
            memo.kube,
            memo.config.lease.name,
            memo.config.lease.namespace,
            reconciler.set_other_installs,
        )

        async def lead_alone() -> None:
            await guard.run(lead)

        memo.leadership = Leadership(memo.kube, memo.config.lease, lead_alone)
        memo.tasks.append(asyncio.create_task(memo.leadership.run(), name="leader-election"))


async def _sync(memo: OperatorState, informers: list[Informer[Any]]) -> None:
    assert memo.kube is not None
    delay = 1.0
    while True:
        try:
            await wait_until_synced(memo.kube, memo.view, memo.seen, informers)
            break
        except asyncio.CancelledError:
            raise
        except Exception as err:
            # The apiserver may be restarting; the watches retry on their own, so do we.
            log.warning("cannot list the cluster yet (%s); retrying in %.0fs", err, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
    memo.running_reconciler().mark_synced()


@kopf.on.cleanup(registry=registry)
async def stop(memo: OperatorState, **_: Any) -> None:
    for task in memo.tasks:
        task.cancel()
    await asyncio.gather(*memo.tasks, return_exceptions=True)
    if memo.kube is not None:
        await memo.kube.close()


@kopf.on.login(registry=registry)
async def login(memo: OperatorState, **_: Any) -> kopf.ConnectionInfo:
    cfg = await credentials.load_configuration(memo.config.credentials)
    return credentials.connection_info(cfg)


# Handlers are coroutines on purpose: kopf runs plain functions in a thread pool, and the
# view and the reconciler belong to the event loop's thread.


@kopf.on.event(api.GROUP, api.VERSION, api.PLURAL, registry=registry)
async def policy_event(event: kopf.RawEvent, memo: OperatorState, **_: Any) -> None:
    body = event["object"]
    memo.seen.note("policies", body["metadata"]["uid"])
    if event["type"] == "DELETED":
        memo.view.remove_policy(body["metadata"]["name"])
        memo.running_reconciler().policies_changed()
        if memo.admission is not None:
            memo.admission.policies_changed()
        return
    obj, changed = memo.view.upsert_policy(body)
    if changed:
        if memo.admission is not None:
            memo.admission.policies_changed()
        if obj.error is not None:
            log.warning("policy %s is invalid: %s", obj.name, obj.error)
        memo.running_reconciler().policies_changed()
    else:
        # Our own status write coming back: nothing to recompute but the status itself.
        memo.running_reconciler().status_changed()
