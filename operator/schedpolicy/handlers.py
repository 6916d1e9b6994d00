"""Kopf wiring. Handlers stay thin: they feed the ClusterView and tell the reconciler
what changed; all decisions are in the pure core and all writes in kube.py.

Every watch uses `on.event` (or `index`), which writes nothing back to the
watched objects: not on Pods, not on Nodes, and not on our own policies either,
so no `kopf.zalando.org/*` annotation or finalizer is ever added anywhere.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from schedpolicy import admission, api, kube
from schedpolicy.instance_guard import InstanceGuard
from schedpolicy.leadership import Leadership
from schedpolicy.persistence import OwnResourceDiffBaseStorage, OwnResourceProgressStorage
from schedpolicy.reconciler import Reconciler
from schedpolicy.scraper import Scraper
from schedpolicy.settings import OperatorState
from schedpolicy.sync_barrier import wait_until_synced

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
    # The MutatingWebhookConfiguration is the chart's (a Service reference, our CA, our
    # selectors); kopf only serves the endpoint and never registers a configuration.
    settings.admission.managed = None
    if memo.config.webhook_port:
        settings.admission.server = kopf.WebhookServer(
            addr=memo.config.webhook_address,
            port=memo.config.webhook_port,
            certfile=memo.config.webhook_cert,
            pkeyfile=memo.config.webhook_key,
        )

    memo.kube = await kube.Kube.connect(memo.config.credentials, memo.config.instance)
    memo.tasks.append(asyncio.create_task(_sync(memo), name="sync-barrier"))
    memo.reconciler = Reconciler(
        memo.kube,
        memo.view,
        concurrency=memo.config.write_concurrency,
        pending_threshold=memo.config.pending_threshold_seconds,
    )
    scraper = Scraper(memo.view, memo.reconciler)
    reconciler = memo.reconciler

    async def lead() -> None:
        await asyncio.gather(reconciler.run(), scraper.run())

    if memo.config.lease is None:
        memo.tasks.append(asyncio.create_task(lead(), name="reconciler"))
    else:
        # The leader of each install holds a Lease of the same name in its own namespace:
        # while an older install's is live, this one writes nothing.
        guard = InstanceGuard(
            memo.kube,
            memo.config.lease.name,
            memo.config.lease.namespace,
            reconciler.set_other_installs,
        )

        async def lead_alone() -> None:
            await guard.run(lead)

        memo.leadership = Leadership(memo.kube, memo.config.lease, lead_alone)
        memo.tasks.append(asyncio.create_task(memo.leadership.run(), name="leader-election"))


async def _sync(memo: OperatorState) -> None:
    assert memo.kube is not None
    delay = 1.0
    while True:
        try:
            await wait_until_synced(memo.kube, memo.view)
            break
        except asyncio.CancelledError:
            raise
        except Exception as err:
            # The apiserver may be restarting; the watches retry on their own, so do we.
            log.warning("cannot list the cluster yet (%s); retrying in %.0fs", err, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
    memo.wake().mark_synced()


@kopf.on.cleanup(registry=registry)
async def stop(memo: OperatorState, **_: Any) -> None:
    for task in memo.tasks:
        task.cancel()
    await asyncio.gather(*memo.tasks, return_exceptions=True)
    if memo.kube is not None:
        await memo.kube.close()


@kopf.on.login(registry=registry)
async def login(memo: OperatorState, **_: Any) -> kopf.ConnectionInfo:
    cfg = await kube.load_configuration(memo.config.credentials)
    return kube.connection_info(cfg)


# Handlers are coroutines on purpose: kopf runs plain functions in a thread pool, and the
# view and the reconciler belong to the event loop's thread.
#
# Only `on.event` handlers, no `kopf.index`: kopf holds every object of an indexed kind until
# all initial listings are done, waking every waiting object on every step, which costs
# quadratic time and all objects' memory on a large cluster. The sync barrier
# (sync_barrier.py) tells the reconciler instead when the view has caught up.


def _gone(event: kopf.RawEvent) -> bool:
    return event["type"] == "DELETED"


@kopf.on.event(api.GROUP, api.VERSION, api.PLURAL, registry=registry)
async def policy_event(event: kopf.RawEvent, memo: OperatorState, **_: Any) -> None:
    body = event["object"]
    memo.view.note("policies", body["metadata"]["uid"])
    if _gone(event):
        memo.view.remove_policy(body["metadata"]["name"])
        memo.wake().policies_changed()
        return
    obj, changed = memo.view.upsert_policy(body)
    if changed:
        if obj.error is not None:
            log.warning("policy %s is invalid: %s", obj.name, obj.error)
        memo.wake().policies_changed()
    else:
        # Our own status write coming back: nothing to recompute but the status itself.
        memo.wake().status_changed()


@kopf.on.event("pods", registry=registry)
async def pod_event(event: kopf.RawEvent, memo: OperatorState, **_: Any) -> None:
    body = event["object"]
    uid = body["metadata"]["uid"]
    memo.view.note("pods", uid)
    reconciler = memo.wake()
    if _gone(event):
        reconciler.changed(memo.view.remove_pod(uid))
        reconciler.pod_gone(uid)
        return
    pod, affected = memo.view.upsert_pod(body)
    reconciler.pod_seen(pod)
    reconciler.changed(affected)


@kopf.on.event("nodes", registry=registry)
async def node_event(event: kopf.RawEvent, memo: OperatorState, **_: Any) -> None:
    body = event["object"]
    memo.view.note("nodes", body["metadata"]["uid"])
    reconciler = memo.wake()
    if _gone(event):
        name = body["metadata"]["name"]
        reconciler.changed(memo.view.remove_node(name))
        reconciler.node_gone(name)
        return
    node, affected = memo.view.upsert_node(body)
    reconciler.node_seen(node)
    reconciler.changed(affected)


@kopf.on.event("apps", "v1", "replicasets", registry=registry)
async def replicaset_event(event: kopf.RawEvent, memo: OperatorState, **_: Any) -> None:
    body = event["object"]
    memo.view.note("replicasets", body["metadata"]["uid"])
    if _gone(event):
        memo.view.remove_replicaset(body["metadata"]["uid"])
    else:
        memo.view.upsert_replicaset(body)


@kopf.on.event("namespaces", registry=registry)
async def namespace_event(event: kopf.RawEvent, memo: OperatorState, **_: Any) -> None:
    meta = event["object"]["metadata"]
    memo.view.note("namespaces", meta["uid"])
    if _gone(event):
        memo.view.remove_namespace(meta["name"])
    else:
        memo.wake().changed(memo.view.upsert_namespace(meta["name"], meta.get("labels") or {}))


async def pod_hints(body: kopf.Body, patch: kopf.Patch, memo: OperatorState, **_: Any) -> None:
    """Placement hints at admission. Fails open: the webhook's failurePolicy is Ignore."""
    decision = admission.hints_for(body, memo.view, memo.config.webhook_exclude_namespaces)
    if decision is None:
        return
    for dotted, value in decision.changes.items():
        section, name = dotted.split(".", 1)
        target = patch.setdefault(section, {})
        if name.startswith("annotations."):
            target.setdefault("annotations", {})[name.split(".", 1)[1]] = value
        else:
            target[name] = value
    log.debug(
        "hints for %s/%s: %s", body.metadata.namespace, body.metadata.name, decision.explanation
    )


def enable_webhook() -> None:
    """Register the admission handler; only when a webhook server is configured, since kopf
    refuses to start with admission handlers and no server."""
    if not any(h.id == "hints" for h in registry._webhooks.get_all_handlers()):
        kopf.on.mutate("pods", id="hints", operations=["CREATE"], registry=registry)(pod_hints)
