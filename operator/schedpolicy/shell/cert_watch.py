"""Act when a serving certificate changes on disk: the webhook exits, /metrics reloads.

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
import ssl
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


async def reload_on_change(
    paths: tuple[str, str], context: ssl.SSLContext, every: float = CHECK_SECONDS
) -> None:
    """Loads a renewed certificate and key into `context`: new handshakes use them, and a
    scrape endpoint, unlike the webhook, has no reason to restart the process."""
    last = fingerprint(paths)
    while True:
        await asyncio.sleep(every)
        now = fingerprint(paths)
        if now == last:
            continue
        try:
            context.load_cert_chain(*paths)
        except (OSError, ssl.SSLError) as err:  # mid-rotation: one file new, one old
            log.info("the metrics certificate is changing (%s); trying again", err)
            continue
        last = now
        log.info("loaded the renewed metrics certificate")
