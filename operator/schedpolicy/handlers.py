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

from schedpolicy import api, kube
from schedpolicy.persistence import OwnResourceDiffBaseStorage, OwnResourceProgressStorage
from schedpolicy.reconciler import Reconciler
from schedpolicy.settings import OperatorState

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
    settings.watching.server_timeout = memo.config.watch_timeout_seconds
    settings.watching.client_timeout = memo.config.watch_timeout_seconds + 30

    memo.kube = await kube.Kube.connect(memo.config.credentials, memo.config.instance)
    memo.reconciler = Reconciler(memo.kube, memo.view)
    memo.tasks.append(asyncio.create_task(memo.reconciler.run(), name="reconciler"))


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


@kopf.on.event(api.GROUP, api.VERSION, api.PLURAL, registry=registry)
def policy_event(event: kopf.RawEvent, memo: OperatorState, **_: Any) -> None:
    body = event["object"]
    if event["type"] == "DELETED":
        memo.view.remove_policy(body["metadata"]["name"])
    else:
        obj = memo.view.upsert_policy(body)
        if obj.error is not None:
            log.warning("policy %s is invalid: %s", obj.name, obj.error)
    memo.wake().policies_changed()
