"""Churn at the envelope: with the whole fleet held, pods replaced at a steady rate (a delete
and a create each time, as a rollout or a scale-up and a scale-down would), while a fresh
controller keeps the costs right.

The lag of a new pod is from its create to the controller's first cost patch on it, on the
apiserver's clock (the audit log) and on a watch's clock (this process watches the pods as
any client would). A churned node's other pods change cost too (NodeConsolidation counts
pods a node, ZoneBalance a ReplicaSet's pods a zone): their lag is from the latest create or
delete on their node or in their ReplicaSet to their new cost, on the watch's clock; a lower
bound, as an earlier one may have been the cause, and held up to minUpdateIntervalSeconds
(10 s by default) by design. At the end every pod's stored cost is checked against the pure
core's recompute of a fresh listing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from bench.convergence.process import start_operator
from bench.envelope import api as api_
from bench.envelope import memory
from bench.envelope.api import JSON, Api, Tally
from bench.envelope.fleet import pod
from bench.envelope.verify import expected, wrong
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.audit import OPERATOR_USER
from localcluster.operator_process import OperatorProcess
from schedpolicy.core.wellknown import COST_ANNOTATION

# (replacements a second, seconds) per phase: a delete and a create each. First a rate the
# controller can keep up with at the envelope (B8 of 2026-12-07: 4.6 writes a replacement at
# 103 writes a second, so about 22 a second), then the 100 a second.
PHASES = {"small": ((10, 60), (20, 120)), "full": ((20, 300), (100, 600))}
IN_FLIGHT = 64
SERIALS = 1_000_000  # each phase names its pods from its own range
DRAIN_SECONDS = 1800


class _Meta(msgspec.Struct, frozen=True):
    uid: str = ""
    name: str = ""
    namespace: str = ""
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    resourceVersion: str = ""


class _Spec(msgspec.Struct, frozen=True):
    nodeName: str = ""


class _Object(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    spec: _Spec = _Spec()


class _Event(msgspec.Struct):
    type: str
    object: _Object


@dataclass
class Watched:
    """What the watch saw, on this process's monotonic clock."""

    added: dict[str, float] = field(default_factory=dict)  # uid of a churned-in pod
    first_cost: dict[str, float] = field(default_factory=dict)
    # The last create or delete on a node, and in a ReplicaSet (namespace/app): what may have
    # changed the cost of the node's and the set's other pods.
    node_touched: dict[str, float] = field(default_factory=dict)
    set_touched: dict[str, float] = field(default_factory=dict)
    cost: dict[str, str] = field(default_factory=dict)
    ripple_lags: list[float] = field(default_factory=list)
    events: int = 0
    reconnects: int = 0
    gone: str = ""  # why the watch stopped for good, if it did


async def _watch(
    api: Api, since: str, seen: Watched, churned: set[str], stop: asyncio.Event
) -> None:
    """Until `stop`; a stream the apiserver ends (a watch timeout, or a watcher it found too
    slow while two cores are saturated) is resumed from the last resourceVersion seen."""
    decode = msgspec.json.Decoder(_Event).decode
    while not stop.is_set():
        path = f"/api/v1/pods?watch=1&resourceVersion={since}&allowWatchBookmarks=true"
        async with api.session.get(
            api.server + path, timeout=aiohttp.ClientTimeout(total=None)
        ) as resp:
            if resp.status != 200:
                seen.gone = f"watch refused: HTTP {resp.status}"
                return
            async for line in resp.content:
                if stop.is_set():
                    return
                ev = decode(line)
                if ev.type == "ERROR":
                    # 410 Gone: the events since `since` have left the watch cache.
                    seen.gone = f"watch ended: {line[:200]!r}"
                    return
                since = ev.object.metadata.resourceVersion or since
                if ev.type != "BOOKMARK":
                    _seen(seen, ev, churned, time.monotonic())
        seen.reconnects += 1


def _seen(seen: Watched, ev: _Event, churned: set[str], now: float) -> None:
    seen.events += 1
    meta, node = ev.object.metadata, ev.object.spec.nodeName
    cost = meta.annotations.get(COST_ANNOTATION)
    owner = f"{meta.namespace}/{meta.labels.get('app', '')}"
    if ev.type == "ADDED" and meta.name in churned:
        seen.added[meta.uid] = now
        seen.node_touched[node] = seen.set_touched[owner] = now
    elif ev.type == "DELETED":
        seen.node_touched[node] = seen.set_touched[owner] = now
        if meta.uid not in seen.first_cost:
            # Replaced again before its first cost: nothing left to cost.
            seen.added.pop(meta.uid, None)
    if cost is None or ev.type == "DELETED":
        return
    if meta.uid in seen.added:
        seen.first_cost.setdefault(meta.uid, now)
    elif seen.cost.get(meta.uid, cost) != cost:
        cause = max(seen.node_touched.get(node, 0.0), seen.set_touched.get(owner, 0.0))
        if cause:
            seen.ripple_lags.append(now - cause)
    seen.cost[meta.uid] = cost


@dataclass
class Driver:
    """Replaces pods at `rate` a second, open loop: each second's work is started on time
    whether or not the last second's has returned (up to IN_FLIGHT requests)."""

    api: Api
    rate: int
    owners: dict[tuple[str, str], JSON]  # (namespace, ReplicaSet) -> the ReplicaSet
    pods: list[tuple[str, str, str]]
    nodes: list[str]
    rng: random.Random = field(default_factory=lambda: random.Random(8))
    tally: Tally = field(default_factory=Tally)
    churned: set[str] = field(default_factory=set)
    done: int = 0
    serials: int = 0  # the first of this driver's pod numbers

    async def replace_one(self, sem: asyncio.Semaphore, serial: int) -> None:
        async with sem:
            i = self.rng.randrange(len(self.pods))
            namespace, name, _ = self.pods[i]
            owner_name = name.rsplit("-", 1)[0]
            node = self.rng.choice(self.nodes)
            body = pod(self.owners[(namespace, owner_name)], self.serials + serial, node, gpu=False)
            fresh = body["metadata"]["name"]
            self.churned.add(fresh)
            self.pods[i] = (namespace, fresh, node)
            path = f"/api/v1/namespaces/{namespace}/pods"
            await self.api.request(
                "DELETE", f"{path}/{name}?gracePeriodSeconds=0", None, self.tally
            )
            await self.api.request("POST", path, body, self.tally)
            self.done += 1

    async def run(self, seconds: int) -> float:
        sem = asyncio.Semaphore(IN_FLIGHT)
        tasks: list[asyncio.Task[None]] = []
        started = time.monotonic()
        serial = 0
        for tick in range(seconds * 10):
            await asyncio.sleep(max(0.0, started + tick / 10 - time.monotonic()))
            for _ in range(self.rate // 10):
                tasks.append(asyncio.create_task(self.replace_one(sem, serial)))
                serial += 1
        await asyncio.gather(*tasks)
        return time.monotonic() - started


def _percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99
    return {
        "count": len(values),
        "p50": round(q[49], 3),
        "p99": round(q[98], 3),
        "max": round(max(values), 3),
    }


def _audit_lags(logs: Path, since: datetime, churned: set[str]) -> dict[str, Any]:
    """From the apiserver's own record: each churned-in pod's create to the controller's first
    patch that the apiserver accepted; and every write of the controller's it refused."""
    created: dict[str, datetime] = {}
    patched: dict[str, datetime] = {}
    refused: Counter[int] = Counter()
    for log in sorted(logs.glob("audit*.log")):
        with log.open() as f:
            for line in f:
                if '"pods"' not in line or "ResponseComplete" not in line:
                    continue
                raw = json.loads(line)
                at = datetime.fromisoformat(raw["stageTimestamp"].replace("Z", "+00:00"))
                if at < since:
                    continue
                ref, verb = raw.get("objectRef") or {}, raw.get("verb")
                name, code = ref.get("name", ""), (raw.get("responseStatus") or {}).get("code", 0)
                user = raw.get("user", {}).get("username", "")
                if verb == "create" and name in churned and code in (200, 201):
                    created[name] = at
                elif verb == "delete" and name in created and name not in patched:
                    # Replaced again before its first cost: nothing was left to cost.
                    del created[name]
                elif user == OPERATOR_USER and verb == "patch":
                    if code != 200:
                        # 429 and 5xx: APF or etcd; 409 and 422: the pod moved under the
                        # write (a JSON Patch test failed) and nothing was written.
                        refused[code] += 1
                    elif name in created and name not in patched:
                        patched[name] = at
    lags = [(patched[n] - created[n]).total_seconds() for n in patched]
    return {
        "lag": _percentiles(lags),
        "created": len(created),
        "never_patched": len(set(created) - set(patched)),
        "controller_writes_refused": dict(refused),
    }


def run(
    cluster: LocalCluster,
    scale: Scale,
    policy: dict[str, Any],
    pods: list[tuple[str, str, str]],
    nodes: list[str],
    size: str,
) -> dict[str, Any]:
    """Each of the size's phases in turn, under one controller, each drained before the next;
    then every pod's cost against a fresh recompute."""
    cpu_nodes = [n for n in nodes if "-cpu-" in n]
    # The GPU set's pods stay: a replacement lands on a random CPU node.
    movable = [p for p in pods if not p[1].startswith("set-000-") or "-cpu-" in p[2]]
    op = start_operator(cluster, scale, None)
    op.wait_for_log("view synced", timeout=1800)
    time.sleep(10)
    phases = []
    for index, (rate, seconds) in enumerate(PHASES[size]):
        phases.append(_phase(cluster, op, index, rate, seconds, movable, cpu_nodes))
        print(f"B8 churn phase {index}: {phases[-1]}", flush=True)
    final = api_.run(lambda api: expected(api, policy), cluster)
    out = {
        "phases": phases,
        "controller": memory.of(op.proc.pid),
        "wrong_after": len(wrong(final)),
        "pods_after": len(final.costs),
    }
    op.stop()
    return out


def _phase(
    cluster: LocalCluster,
    op: OperatorProcess,
    index: int,
    rate: int,
    seconds: int,
    movable: list[tuple[str, str, str]],
    cpu_nodes: list[str],
) -> dict[str, Any]:
    writes_before = op.metric("schedpolicy_cost_writes_total", result="ok") or 0
    depth: list[float] = []
    started_at = datetime.now(UTC)

    async def churn(api: Api) -> dict[str, Any]:
        owners = {}
        for ns in sorted({p[0] for p in movable}):
            async for rs in api.pages(f"/apis/apps/v1/namespaces/{ns}/replicasets"):
                owners[(ns, rs["metadata"]["name"])] = rs
        _, listed = await api.request("GET", "/api/v1/pods?limit=1")
        seen, stop = Watched(), asyncio.Event()
        driver = Driver(api, rate, owners, movable, cpu_nodes, serials=SERIALS * (index + 1))
        watcher = asyncio.create_task(
            _watch(api, listed["metadata"]["resourceVersion"], seen, driver.churned, stop)
        )

        driven, caught_up = asyncio.Event(), asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                depth.append(
                    await asyncio.to_thread(op.metric, "schedpolicy_write_queue_depth") or 0
                )
                # Caught up: the churn is over and the queue has been empty for 10 s.
                if driven.is_set() and len(depth) >= 10 and not any(depth[-10:]):
                    caught_up.set()
                await asyncio.sleep(1)

        sampler = asyncio.create_task(sample())
        took = await driver.run(seconds)
        driven.set()
        drained = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(caught_up.wait(), DRAIN_SECONDS)
        drain = time.monotonic() - drained
        stop.set()
        watcher.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        lags = [seen.first_cost[u] - seen.added[u] for u in seen.first_cost]
        return {
            "target_per_second": rate,
            "replaced": driver.done,
            "seconds": round(took, 1),
            "achieved_per_second": round(driver.done / took, 1),
            "drain_seconds": round(drain, 1),
            "drained": drain < DRAIN_SECONDS,
            "driver_refused": {k: v for k, v in driver.tally.codes.items() if k >= 400},
            "driver_retried": driver.tally.retried,
            "watch": {
                "lag_new_pods": _percentiles(lags),
                "new_pods_never_costed": len(set(seen.added) - set(seen.first_cost)),
                "lag_rippled_pods": _percentiles(seen.ripple_lags),
                "events": seen.events,
                "reconnects": seen.reconnects,
                "gone": seen.gone,
            },
            "churned": sorted(driver.churned),
        }

    out = api_.run(churn, cluster, concurrency=IN_FLIGHT + 8)
    churned = set(out.pop("churned"))
    writes = (op.metric("schedpolicy_cost_writes_total", result="ok") or 0) - writes_before
    out.update(
        controller_writes=int(writes),
        queue_depth={
            "max": max(depth, default=0),
            "p99": _percentiles(depth)["p99"],
            "mean": round(statistics.fmean(depth), 1) if depth else None,
        },
        audit=_audit_lags(cluster.workdir / "logs", started_at, churned),
    )
    return out
