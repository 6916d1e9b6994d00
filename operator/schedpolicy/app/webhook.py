"""`schedpolicy webhook`: admission in its own process, apart from the controller.

Every pod create in the cluster waits on this process, so nothing else shares its event
loop: no pod watch, no cost writes, no leader election (every replica serves). It reads
only what hints need, through its own informers: the policies, namespace labels, and node
labels read as metadata only. `/readyz` turns 200 once all three have read their initial
state, so the Service sends no request to a replica that would answer from nothing.

The serving certificate is read once; when the files change on disk (cert-manager's
renewal) the process stops, and the kubelet starts it again with the new ones.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Histogram

from schedpolicy.core import api
from schedpolicy.shell import cert_watch, heap, metrics, secure_metrics, serving_tls
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.informer import Informer, Resource, by_name
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.secure_metrics import MetricsServing
from schedpolicy.view import wire
from schedpolicy.view.placement import review as admission
from schedpolicy.view.placement.admission_view import AdmissionView

log = logging.getLogger("schedpolicy.webhook")

WEBHOOK_SECONDS = Histogram(
    "schedpolicy_webhook_duration_seconds",
    "Time to answer one AdmissionReview, from the request's arrival to its response body.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
WEBHOOK_REQUESTS = Counter(
    "schedpolicy_webhook_requests_total",
    "AdmissionReviews answered, by result: hinted, unchanged (no policy places the pod),"
    " error (admitted unhinted), malformed (not an AdmissionReview: 400).",
    ["result"],
)
metrics.with_zeros(WEBHOOK_REQUESTS, "result", ("hinted", "unchanged", "error", "malformed"))

POLICIES = Resource(
    "policies", f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}", wire.SchedulingPolicy, by_name
)
NAMESPACES = Resource(
    "namespaces", "/api/v1/namespaces", wire.Metadata, by_name, metadata_only=True
)
NODES = Resource("nodes", "/api/v1/nodes", wire.Metadata, by_name, metadata_only=True)


class _Policies:
    def __init__(self, view: AdmissionView) -> None:
        self.view = view

    def upsert(self, obj: wire.SchedulingPolicy) -> None:
        parsed = self.view.upsert_policy(obj)
        if parsed.error is not None:
            log.info("policy %s is invalid and places nothing: %s", parsed.name, parsed.error)

    def delete(self, obj: wire.SchedulingPolicy) -> None:
        self.view.remove_policy(obj.metadata.name)

    def prune(self, keep: set[str]) -> None:
        for obj in self.view.policy_objects():
            if obj.name not in keep:
                self.view.remove_policy(obj.name)


class _Namespaces:
    def __init__(self, view: AdmissionView) -> None:
        self.view = view

    def upsert(self, obj: wire.Metadata) -> None:
        self.view.upsert_namespace(obj.metadata.name, obj.metadata.labels)

    def delete(self, obj: wire.Metadata) -> None:
        self.view.remove_namespace(obj.metadata.name)

    def prune(self, keep: set[str]) -> None:
        for name in self.view.namespace_names():
            if name not in keep:
                self.view.remove_namespace(name)


class _Nodes:
    def __init__(self, view: AdmissionView) -> None:
        self.view = view

    def upsert(self, obj: wire.Metadata) -> None:
        self.view.upsert_node(obj.metadata.name, obj.metadata.labels)

    def delete(self, obj: wire.Metadata) -> None:
        self.view.remove_node(obj.metadata.name)

    def prune(self, keep: set[str]) -> None:
        for name in self.view.node_names() - keep:
            self.view.remove_node(name)


@dataclass
class WebhookConfig:
    credentials: Credentials = field(default_factory=Credentials)
    port: int = 8443
    address: str = "0.0.0.0"  # all interfaces: the apiserver calls in through a Service
    cert: str | None = None
    key: str | None = None
    exclude_namespaces: tuple[str, ...] = ("kube-system",)
    metrics: MetricsServing = field(default_factory=MetricsServing)
    health_port: int = 0
    watch_timeout_seconds: int = 300
    # After a stop signal: seconds of serving while unready. The apiserver keeps calling a
    # pod until it sees the pod's endpoint go; a call that finds nobody would fail open.
    shutdown_delay: float = 0.0
    identity: str = "webhook"


# Longer than the apiserver's idle-connection timeout (90 s): the client, not the server,
# closes an idle keep-alive connection, so a request can never race the server's close.
KEEPALIVE_SECONDS = 120.0


def application(
    view: AdmissionView, excluded: Collection[str], stopping: asyncio.Event | None = None
) -> web.Application:
    async def hints(request: web.Request) -> web.Response:
        started = time.perf_counter()
        body = await request.read()
        try:
            answer = admission.review(body, view, excluded)
        except admission.MalformedReview as err:
            WEBHOOK_REQUESTS.labels(result="malformed").inc()
            return web.Response(status=400, text=f"not an AdmissionReview: {err}")
        WEBHOOK_SECONDS.observe(time.perf_counter() - started)
        WEBHOOK_REQUESTS.labels(result=answer.result).inc()
        if answer.decision is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("hinted a pod: %s", "; ".join(answer.decision.explanation))
        response = web.Response(body=answer.body, content_type="application/json")
        if stopping is not None and stopping.is_set():
            # The apiserver pools connections by Service name, across pods: it would keep
            # sending to this pod over them after its endpoint went. `Connection: close`
            # retires each one cleanly, before the process goes.
            response.force_close()
        return response

    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/hints", hints)
    return app


def probes(
    view: AdmissionView, informers: list[Informer[Any]], stopping: asyncio.Event
) -> web.Application:
    def synced() -> bool:
        return all(i.synced.is_set() for i in informers)

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "synced": synced()})

    async def readyz(_: web.Request) -> web.Response:
        if stopping.is_set():
            return web.json_response({"status": "shutting down"}, status=503)
        if not synced():
            return web.json_response({"status": "view not synced yet"}, status=503)
        return web.json_response({"status": "ready", "policies": len(view.policies())})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def serve(cfg: WebhookConfig, stop: asyncio.Event | None = None) -> None:
    heap.tune()
    halt = stop or asyncio.Event()
    kube = await Kube.connect(cfg.credentials, cfg.identity)
    view = AdmissionView()
    t = cfg.watch_timeout_seconds
    informers: list[Informer[Any]] = [
        Informer(kube, POLICIES, _Policies(view), timeout_seconds=t),
        Informer(kube, NAMESPACES, _Namespaces(view), timeout_seconds=t),
        Informer(kube, NODES, _Nodes(view), timeout_seconds=t),
    ]
    tasks = [asyncio.create_task(i.run(), name=f"informer-{i.resource.kind}") for i in informers]
    runner = web.AppRunner(
        application(view, cfg.exclude_namespaces, halt),
        access_log=None,
        keepalive_timeout=KEEPALIVE_SECONDS,
    )
    await runner.setup()
    runners = [runner]
    context = None
    if cfg.cert and cfg.key:
        context = serving_tls.tls_context(cfg.cert, cfg.key)
        serving_tls.bound_read_buffers()
        files = (cfg.cert, cfg.key)
        tasks.append(asyncio.create_task(cert_watch.stop_on_change(files, halt.set)))
    await web.TCPSite(runner, cfg.address, cfg.port, ssl_context=context).start()
    scrape = await secure_metrics.serve(cfg.metrics, kube, tasks)
    if scrape is not None:
        runners.append(scrape)
    if cfg.health_port:
        # Plain HTTP for the kubelet's probes, like the controller's; no /hints there.
        health = web.AppRunner(probes(view, informers, halt), access_log=None)
        await health.setup()
        runners.append(health)
        await web.TCPSite(health, "0.0.0.0", cfg.health_port).start()
    scheme = "https" if context else "http"
    log.info("admission on %s://%s:%d/hints", scheme, cfg.address, cfg.port)

    async def announce_sync() -> None:
        await asyncio.gather(*(i.synced.wait() for i in informers))
        heap.settle()
        log.info(
            "webhook view synced: %d policies, %d namespaces",
            len(view.policies()),
            len(view.namespaces),
        )

    tasks.append(asyncio.create_task(announce_sync()))
    try:
        await halt.wait()
        if cfg.shutdown_delay > 0:
            log.info("stopping: serving %.0fs more while unready", cfg.shutdown_delay)
            await asyncio.sleep(cfg.shutdown_delay)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for each in runners:
            await each.cleanup()
        await kube.close()
