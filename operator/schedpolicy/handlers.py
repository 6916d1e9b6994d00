"""Kopf wiring. Handlers stay thin: they read events, call the pure core and hand
the results to kube.py. Pods and Nodes are only ever watched through
`on.event` and `index` handlers, which write nothing back to the objects."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from schedpolicy import kube
from schedpolicy.persistence import OwnResourceDiffBaseStorage, OwnResourceProgressStorage
from schedpolicy.settings import RunConfig

registry = kopf.OperatorRegistry()


@kopf.on.startup(registry=registry)
def configure(settings: kopf.OperatorSettings, memo: RunConfig, **_: Any) -> None:
    settings.peering.standalone = True
    settings.persistence.progress_storage = OwnResourceProgressStorage(
        kopf.AnnotationsProgressStorage(prefix="schedpolicy.io")
    )
    settings.persistence.diffbase_storage = OwnResourceDiffBaseStorage(
        kopf.AnnotationsDiffBaseStorage(prefix="schedpolicy.io", key="last-handled-configuration")
    )
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = memo.watch_timeout_seconds
    settings.watching.client_timeout = memo.watch_timeout_seconds + 30


@kopf.on.login(registry=registry)
async def login(memo: RunConfig, **_: Any) -> kopf.ConnectionInfo:
    cfg = await kube.load_configuration(memo.credentials)
    return kube.connection_info(cfg)
