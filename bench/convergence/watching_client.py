"""B1's fairer baseline: the least any watching controller makes the apiserver do.

A bare client that streams every pod (the watch-list protocol, as the operator does),
waits for the initial-events-end bookmark, and then sends the same precomputed JSON
Patches with the same concurrency while its watch stays open and receives every echo.
It decodes nothing: it only reads the stream, so the figure is the apiserver's work and
the network's, not a client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from bench.convergence.patches import send
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.informer import JSON
from schedpolicy.shell.kube import Kube

END = b'"k8s.io/initial-events-end":"true"'


async def stream_then_patch(
    kubeconfig: str,
    namespace: str,
    patches: list[tuple[str, list[dict[str, Any]]]],
    concurrency: int,
) -> tuple[float, int]:
    """(seconds from connecting to the last patch answered, errors)."""
    started = time.perf_counter()
    kube = await Kube.connect(Credentials(kubeconfig=kubeconfig), "bench-watching-client")
    synced = asyncio.Event()

    async def watch() -> None:
        query = [
            ("watch", "1"),
            ("allowWatchBookmarks", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("timeoutSeconds", "900"),
        ]
        response = await kube.open_stream("/api/v1/pods", query, JSON, 930)
        try:
            async for chunk in response.content.iter_any():
                if not synced.is_set() and END in chunk:
                    synced.set()
        finally:
            response.release()

    watcher = asyncio.create_task(watch())
    await synced.wait()
    errors = await send(kube, namespace, patches, concurrency)
    elapsed = time.perf_counter() - started
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    await kube.close()
    return elapsed, errors
