"""Sending precomputed JSON Patches with bounded concurrency: what both B1 baselines do."""

from __future__ import annotations

import asyncio
from typing import Any

from schedpolicy.shell.kube import Kube

Patch = tuple[str, list[dict[str, Any]]]  # pod name, JSON Patch


async def send(kube: Kube, namespace: str, patches: list[Patch], concurrency: int) -> int:
    """Send every patch, `concurrency` at a time; returns how many failed."""
    queue: asyncio.Queue[Patch] = asyncio.Queue()
    for item in patches:
        queue.put_nowait(item)
    errors = 0

    async def worker() -> None:
        nonlocal errors
        while not queue.empty():
            name, patch = queue.get_nowait()
            try:
                await kube.patch_pod(namespace, name, patch)
            except Exception:
                errors += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return errors
