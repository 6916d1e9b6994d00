"""When the view has caught up with the cluster.

Deciding on a partial view would write costs that the rest of the listing then changes,
or remove costs whose policy has not been seen yet. So before the reconciler decides
anything, every informer must have read its initial state (its initial-events-end
bookmark, or the end of its paged list), and the view must have seen every policy that
kopf's watch delivers: those are listed as metadata only and waited for, or seen to go.
A policy deleted before the watch ever saw it is dropped by listing again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from schedpolicy.core import api
from schedpolicy.shell.informer import Informer
from schedpolicy.shell.kube import Kube
from schedpolicy.view.cluster import ClusterView

log = logging.getLogger("schedpolicy.sync")

COLLECTIONS = {"policies": f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"}


class Seen:
    """UIDs each kind's watch has delivered (deleted ones too), until the barrier is through."""

    def __init__(self) -> None:
        self._uids: dict[str, set[str]] = {kind: set() for kind in COLLECTIONS}
        self._tracking = True

    def note(self, kind: str, uid: str) -> None:
        if self._tracking:
            self._uids[kind].add(uid)

    def uids(self, kind: str) -> set[str]:
        return self._uids.get(kind, set())

    def stop(self) -> None:
        self._tracking = False
        self._uids.clear()


async def wait_until_synced(
    kube: Kube,
    view: ClusterView,
    seen: Seen,
    informers: Sequence[Informer[Any]],
    poll: float = 0.2,
) -> None:
    started = time.monotonic()
    await asyncio.gather(*(informer.synced.wait() for informer in informers))
    expected = {kind: await kube.list_uids(path) for kind, path in COLLECTIONS.items()}
    relisted = time.monotonic()
    while True:
        missing = {kind: uids - seen.uids(kind) for kind, uids in expected.items()}
        if not any(missing.values()):
            break
        if time.monotonic() - relisted > 5:
            # Still missing after a while: those may be gone without our watch seeing them.
            for kind, uids in missing.items():
                if uids:
                    expected[kind] &= await kube.list_uids(COLLECTIONS[kind]) | seen.uids(kind)
            relisted = time.monotonic()
        await asyncio.sleep(poll)
    seen.stop()
    log.info(
        "view caught up with %d pods, %d nodes, %d policies in %.1fs",
        len(view.pods),
        len(view.nodes),
        len(expected["policies"]),
        time.monotonic() - started,
    )
