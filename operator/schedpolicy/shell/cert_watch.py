"""Exit when the webhook's serving certificate changes on disk.

kopf's webhook server loads its certificate once, at start. cert-manager renews
certificates (every 60 of 90 days by default) by updating the mounted Secret; a
process that kept serving the old one would, once it expired, fail every admission
call, and with failurePolicy Ignore pods would silently lose their hints. Stopping
lets the kubelet start the container again with the new files, and with two
replicas and a PodDisruptionBudget the webhook stays served meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger("schedpolicy.certs")

CHECK_SECONDS = 10.0


def fingerprint(paths: Iterable[str]) -> str:
    """A digest of the files' contents; a missing file counts as empty (mid-rotation)."""
    digest = hashlib.sha256()
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            digest.update(Path(path).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


async def stop_on_change(
    paths: tuple[str, ...], stop: Callable[[], None], every: float = CHECK_SECONDS
) -> None:
    first = fingerprint(paths)
    while True:
        await asyncio.sleep(every)
        if fingerprint(paths) != first:
            log.warning(
                "the webhook's serving certificate changed on disk; stopping so that the"
                " process restarts with it"
            )
            stop()
            return
