"""`/metrics` over HTTPS, for callers the apiserver authenticates and authorizes.

This is what controller-runtime's `filters.WithAuthenticationAndAuthorization` does for
Go operators; Python has no maintained equivalent, so the steps are here and the
judgement is the apiserver's: a TokenReview for the bearer token, then a
SubjectAccessReview for `get` on the non-resource URL `/metrics`. Answers are cached
briefly, as controller-runtime caches them (a minute for a token, five minutes for an
allow, thirty seconds for a deny), so a scrape every 30 s costs the apiserver little.

Without a certificate file the server makes a self-signed one at start, as
controller-runtime does; the chart's ServiceMonitors then skip verification unless
given a CA. TLS is `serving_tls`'s, as on the webhook's admission port.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import prometheus_client
from aiohttp import web

from schedpolicy.core import access
from schedpolicy.shell import cert_watch
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.serving_tls import self_signed, tls_context

log = logging.getLogger("schedpolicy.metrics")

PATH = "/metrics"
TOKEN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
CACHE_LIMIT = 1024


@dataclass(frozen=True)
class MetricsServing:
    """How a process serves /metrics."""

    port: int = 8443
    address: str = "0.0.0.0"  # all interfaces: Prometheus scrapes from other pods
    secure: bool = True  # False: plain HTTP, no authentication (local use only)
    cert: str | None = None
    key: str | None = None


K = TypeVar("K")
V = TypeVar("V")


class _Expiring(Generic[K, V]):
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._items: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        hit = self._items.get(key)
        if hit is None or hit[0] <= self._clock():
            return None
        return hit[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if len(self._items) >= CACHE_LIMIT:
            now = self._clock()
            self._items = {k: v for k, v in self._items.items() if v[0] > now}
            if len(self._items) >= CACHE_LIMIT:
                self._items.clear()
        self._items[key] = (self._clock() + ttl, value)


class Gate:
    """TokenReview, then SubjectAccessReview, each answer cached for a while."""

    def __init__(self, kube: Kube, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        # Keyed by a digest: the cache never holds a token itself.
        self._users: _Expiring[str, access.User | access.Verdict] = _Expiring(clock)
        self._verdicts: _Expiring[access.User, access.Verdict] = _Expiring(clock)

    async def check(self, authorization: str | None) -> access.Verdict:
        token = access.bearer_token(authorization)
        if token is None:
            return access.Verdict(401, "unauthenticated: no bearer token")
        digest = hashlib.sha256(token.encode()).hexdigest()
        user = self._users.get(digest)
        if user is None:
            user = access.authenticated(
                await self.kube.review("tokenreviews", access.token_review(token))
            )
            self._users.put(digest, user, TOKEN_TTL)
        if isinstance(user, access.Verdict):
            return user
        verdict = self._verdicts.get(user)
        if verdict is None:
            answer = await self.kube.review(
                "subjectaccessreviews", access.access_review(user, PATH)
            )
            verdict = access.authorized(user, answer, PATH)
            self._verdicts.put(user, verdict, ALLOW_TTL if verdict.allowed else DENY_TTL)
        return verdict


def application(gate: Gate, registry: prometheus_client.CollectorRegistry) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        try:
            verdict = await gate.check(request.headers.get("Authorization"))
        except Exception as err:  # the apiserver could not judge; neither can we
            log.warning("could not review a /metrics caller: %s", err)
            return web.Response(status=503, text="cannot reach the apiserver to authorize\n")
        if not verdict.allowed:
            log.debug("refused a /metrics scrape (%d): %s", verdict.status, verdict.reason)
            headers = {"WWW-Authenticate": "Bearer"} if verdict.status == 401 else None
            return web.Response(status=verdict.status, text=verdict.reason + "\n", headers=headers)
        # Off the event loop: a large page must not delay the process's own work.
        body = await asyncio.to_thread(prometheus_client.generate_latest, registry)
        return web.Response(
            body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get(PATH, metrics)
    return app


async def serve(
    serving: MetricsServing,
    kube: Kube | None,
    tasks: list[asyncio.Task[None]],
    registry: prometheus_client.CollectorRegistry = prometheus_client.REGISTRY,
) -> web.AppRunner | None:
    """Starts /metrics as `serving` says; a task that reloads a mounted certificate when it
    changes is appended to `tasks`. None when there is nothing to serve on an aiohttp
    runner (port 0, or plain HTTP, which prometheus_client serves on its own thread)."""
    if not serving.port:
        return None
    if not serving.secure:
        prometheus_client.start_http_server(serving.port, addr=serving.address, registry=registry)
        log.warning(
            "metrics on http://%s:%d%s, unauthenticated", serving.address, serving.port, PATH
        )
        return None
    if kube is None:
        raise RuntimeError("authenticated metrics need an API client for the reviews")
    if serving.cert and serving.key:
        cert, key = serving.cert, serving.key
    else:
        cert, key = self_signed(Path(tempfile.mkdtemp(prefix="schedpolicy-metrics-")), "localhost")
    context = tls_context(cert, key)
    if serving.cert and serving.key:
        files = (cert, key)
        tasks.append(asyncio.create_task(cert_watch.reload_on_change(files, context)))
    runner = web.AppRunner(application(Gate(kube), registry), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, serving.address, serving.port, ssl_context=context).start()
    log.info(
        "metrics on https://%s:%d%s, for callers allowed GET", serving.address, serving.port, PATH
    )
    return runner
