"""When the view has caught up with the cluster.

Deciding on a partial view would write costs that the rest of the listing then changes,
or remove costs whose policy has not been seen yet. So before the reconciler decides
anything, the barrier lists every watched kind as metadata only (UIDs, page by page) and
waits until the view has seen each of those objects, or seen it go. An object deleted
before the watch ever saw it is dropped by listing again.
"""

from __future__ import annotations

import asyncio
import logging
import time

from schedpolicy import api
from schedpolicy.cluster import ClusterView
from schedpolicy.kube import Kube

log = logging.getLogger("schedpolicy.sync")

COLLECTIONS = {
    "pods": "/api/v1/pods",
    "nodes": "/api/v1/nodes",
    "namespaces": "/api/v1/namespaces",
    "replicasets": "/apis/apps/v1/replicasets",
    "policies": f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}",
}


async def wait_until_synced(kube: Kube, view: ClusterView, poll: float = 0.2) -> None:
    started = time.monotonic()
    expected = {kind: await kube.list_uids(path) for kind, path in COLLECTIONS.items()}
    relisted = time.monotonic()
    while True:
        missing = {kind: uids - view.seen[kind] for kind, uids in expected.items()}
        if not any(missing.values()):
            break
        if time.monotonic() - relisted > 5:
            # Still missing after a while: those may be gone without our watch seeing them.
            for kind, uids in missing.items():
                if uids:
                    expected[kind] &= await kube.list_uids(COLLECTIONS[kind]) | view.seen[kind]
            relisted = time.monotonic()
        await asyncio.sleep(poll)
    view.stop_tracking()
    log.info(
        "view caught up with %s in %.1fs",
        ", ".join(f"{len(uids)} {kind}" for kind, uids in expected.items()),
        time.monotonic() - started,
    )
