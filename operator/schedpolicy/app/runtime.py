"""Runs one operator process: kopf's reactor plus a heartbeat log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

import kopf

from schedpolicy import __version__
from schedpolicy.app import health
from schedpolicy.app.handlers import registry
from schedpolicy.app.settings import OperatorState, RunConfig
from schedpolicy.shell import heap, secure_metrics
from schedpolicy.shell.kube import Kube

log = logging.getLogger("schedpolicy")


async def heartbeat(interval: float, stop: asyncio.Event) -> None:
    beats = 0
    while not stop.is_set():
        log.info("heartbeat %d: schedpolicy %s is running", beats, __version__)
        beats += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)


async def run(cfg: RunConfig, stop_flag: threading.Event | None = None) -> None:
    heap.tune()
    stop = asyncio.Event()
    background = [asyncio.create_task(heartbeat(cfg.heartbeat_seconds, stop))]
    # Its own API client: the reviews must not queue behind the controller's writes.
    reviewer = await Kube.connect(cfg.credentials, cfg.identity) if cfg.metrics.secure else None
    metrics = await secure_metrics.serve(cfg.metrics, reviewer, background)
    memo = OperatorState(config=cfg)
    # Up before kopf: a replica that cannot reach the apiserver is alive but not ready.
    probes = await health.serve(memo, "0.0.0.0", cfg.liveness_port) if cfg.liveness_port else None
    halt: threading.Event | asyncio.Event = stop_flag or asyncio.Event()
    try:
        await kopf.operator(
            registry=registry,
            memo=memo,
            clusterwide=True,
            standalone=True,
            stop_flag=halt,
        )
    finally:
        stop.set()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        if probes is not None:
            await probes.cleanup()
        if metrics is not None:
            await metrics.cleanup()
        if reviewer is not None:
            await reviewer.close()
