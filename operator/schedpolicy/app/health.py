"""Liveness and readiness over HTTP, for the kubelet's probes.

`/healthz` answers as long as the event loop does. `/readyz` answers 200 only once the
in-memory view has listed every watched kind: before that, admission would hint from
an empty view and the leader would decide from nothing, so the Service should not send
this replica any webhook traffic yet. Served apart from kopf's own probe endpoint, which
has one path and always answers 200.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from schedpolicy.app.settings import OperatorState

log = logging.getLogger("schedpolicy.health")


def state(memo: OperatorState) -> dict[str, Any]:
    reconciler = memo.reconciler
    return {
        "synced": bool(reconciler and reconciler.synced.is_set()),
        "leading": memo.leadership.leading if memo.leadership else memo.config.lease is None,
        "pods": len(memo.view.pods),
        "nodes": len(memo.view.nodes),
    }


def app(memo: OperatorState) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", **state(memo)})

    async def readyz(_: web.Request) -> web.Response:
        now = state(memo)
        if not now["synced"]:
            return web.json_response({"status": "view not synced yet", **now}, status=503)
        return web.json_response({"status": "ready", **now})

    application = web.Application()
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    return application


async def serve(memo: OperatorState, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app(memo), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    log.info("health on http://%s:%d/healthz and /readyz", host, port)
    return runner
