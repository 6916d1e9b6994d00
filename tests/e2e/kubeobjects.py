"""Small builders and waiters for the objects e2e tests create."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from kubernetes_asyncio import client

T = TypeVar("T")

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def deployment(
    name: str,
    replicas: int,
    *,
    node_selector: dict[str, str] | None = None,
    cpu: str = "100m",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    match = {"app": name, **(labels or {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": match},
                "spec": {
                    "nodeSelector": node_selector or {},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "app",
                            "image": PAUSE_IMAGE,
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                },
            },
        },
    }


def is_running_and_ready(pod: client.V1Pod) -> bool:
    if pod.metadata.deletion_timestamp is not None or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 60, what: str = "condition"
) -> T:
    """Poll `probe` until it returns something other than None or False."""
    deadline = time.monotonic() + within
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last is not None and last is not False:
            return last
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")


async def scheduled_by(
    api: client.ApiClient, namespace: str, names: Iterable[str]
) -> dict[str, str]:
    """Which scheduler reported binding each named pod, from its `Scheduled` Event.

    Events are recorded asynchronously, after the binding, so this waits for all of them.
    """
    core = client.CoreV1Api(api)
    wanted = set(names)

    async def reporters() -> dict[str, str] | None:
        events = (await core.list_namespaced_event(namespace)).items
        found = {
            e.involved_object.name: e.reporting_component
            for e in events
            if e.reason == "Scheduled" and e.involved_object.name in wanted
        }
        return found if set(found) == wanted else None

    return await eventually(reporters, what="a Scheduled event for every pod")


def wait_until(probe: Callable[[], T | None], *, within: float = 60, what: str = "condition") -> T:
    """The blocking twin of `eventually`, for tests that drive kubectl."""
    deadline = time.monotonic() + within
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")


async def ready_pods(
    api: client.ApiClient, namespace: str, selector: str, count: int
) -> list[client.V1Pod]:
    core = client.CoreV1Api(api)

    async def probe() -> list[client.V1Pod] | None:
        pods = (await core.list_namespaced_pod(namespace, label_selector=selector)).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        if len(live) == count and all(is_running_and_ready(p) for p in live):
            return live
        return None

    return await eventually(probe, what=f"{count} running and ready pods matching {selector}")
