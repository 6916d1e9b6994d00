"""Runs one operator process: kopf's reactor plus a heartbeat log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

import kopf
import prometheus_client

from schedpolicy import __version__
from schedpolicy.app import health
from schedpolicy.app.handlers import registry
from schedpolicy.app.settings import OperatorState, RunConfig
from schedpolicy.shell import heap

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
    if cfg.metrics_port:
        prometheus_client.start_http_server(cfg.metrics_port, addr=cfg.metrics_address)
        log.info("metrics on http://%s:%d/metrics", cfg.metrics_address, cfg.metrics_port)
    memo = OperatorState(config=cfg)
    # Up before kopf: a replica that cannot reach the apiserver is alive but not ready.
    probes = await health.serve(memo, "0.0.0.0", cfg.liveness_port) if cfg.liveness_port else None
    stop = asyncio.Event()
    background = [asyncio.create_task(heartbeat(cfg.heartbeat_seconds, stop))]
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
