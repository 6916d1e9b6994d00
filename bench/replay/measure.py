"""A replay lane's figures, from what the watches saw and the audit log held. Pure.

Times are replay seconds from the day's start; figures in hours and dollars are converted to
the trace's clock (x compression), which is what a cluster would have paid for that day.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache

from bench.replay.observe import NodeSeen, PodSeen, Seen
from bench.replay.plan import Plan
from localcluster import write_checks
from localcluster.audit import AuditEvent
from localcluster.chart import NAMESPACE as RELEASE_NAMESPACE
from localcluster.karpenter import Catalog


@dataclass(frozen=True)
class Eviction:
    pod: str
    at: float  # replay seconds from the day's start


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _alive(start: float, stop: float | None, end: float) -> float:
    return max(0.0, min(stop if stop is not None else end, end) - max(start, 0.0))


def node_figures(
    nodes: Iterable[NodeSeen], catalog: Catalog, end: float, k: float
) -> dict[str, float]:
    """Node-hours, GPU-hours provisioned and dollars, on the trace's clock (k = compression)."""
    gpu_node_s = gpu_s = gpu_dollars = dollars = 0.0
    prices = catalog.by_name()
    for n in nodes:
        alive = _alive(n.added, n.gone, end)
        price = (
            prices[n.instance_type].prices.get(n.capacity, 0.0)
            if n.instance_type in prices
            else 0.0
        )
        cost = alive / 3600 * price
        dollars += cost
        if n.gpus:
            gpu_node_s += alive
            gpu_s += alive * n.gpus
            gpu_dollars += cost
    return {
        "gpu_node_hours": round(gpu_node_s * k / 3600, 2),
        "gpu_hours_provisioned": round(gpu_s * k / 3600, 1),
        "gpu_dollars": round(gpu_dollars * k, 2),
        "dollars": round(dollars * k, 2),
    }


def needed_gpu_hours(plan: Plan) -> float:
    points = plan.gpus_over_time()
    total = 0.0
    for (t, demand), (t_next, _) in zip(points, [*points[1:], (plan.duration, {})], strict=True):
        total += sum(size * count for size, count in demand.items()) * (t_next - t)
    return total * plan.timers.compression / 3600


@cache
def _cheapest_cover(gpus: int, offers: tuple[tuple[int, float], ...]) -> float:
    """Least dollars per hour for nodes holding `gpus` GPUs of replicas of 1, 2 or 4 GPUs:
    every catalog size is a multiple of 4, so any such replicas that sum to a node's
    capacity fill it."""
    if gpus <= 0:
        return 0.0
    return min(price + _cheapest_cover(gpus - size, offers) for size, price in offers)


def offline_bound(plan: Plan, catalog: Catalog) -> dict[str, float]:
    """What no placement beats: at every instant, the replicas' GPUs on as few GPU nodes as
    hold them (8 to a node), and on the cheapest nodes that hold them (spot prices, every
    8-GPU replica on the cheapest 8-GPU type). CPU frontends are left out."""
    offers = tuple(sorted({(t.gpus, min(t.prices.values())) for t in catalog.types if t.gpus}))
    eight = min(p for g, p in offers if g >= 8)
    most = max(g for g, _ in offers)
    node_s = dollar_s = 0.0
    points = plan.gpus_over_time()
    for (t, demand), (t_next, _) in zip(points, [*points[1:], (plan.duration, {})], strict=True):
        span = t_next - t
        total = sum(size * count for size, count in demand.items())
        node_s += math.ceil(total / most) * span
        rest = total - 8 * demand.get(8, 0)
        dollar_s += (demand.get(8, 0) * eight + _cheapest_cover(rest, offers)) * span
    k = plan.timers.compression
    return {
        "gpu_node_hours": round(node_s * k / 3600, 2),
        "gpu_dollars": round(dollar_s * k / 3600, 2),
    }


def disruption(
    seen: Seen, evictions: Sequence[Eviction], serving: set[str], end: float
) -> dict[str, int]:
    """Serving pods Karpenter disrupted: evicted through the eviction subresource, or on a
    node when Karpenter began to delete it. Nodes it removed count as emptied (no pod of the
    lane left on them) or consolidated by moving pods."""
    by_name = {p.name: p for p in seen.pods.values()}
    evicted = {e.pod for e in evictions if 0 <= e.at <= end}
    on_deleted: set[str] = set()
    emptied = moved = 0
    for node in seen.nodes.values():
        if node.deleting is None or not 0 <= node.deleting <= end:
            continue
        there = [p for p in seen.pods.values() if _on(p, node.name, node.deleting)]
        on_deleted.update(p.name for p in there)
        if there or any(by_name.get(e) and by_name[e].node == node.name for e in evicted):
            moved += 1
        else:
            emptied += 1
    disrupted = evicted | on_deleted
    return {
        "serving_pods_disrupted": sum(
            1 for n in disrupted if n in by_name and by_name[n].service in serving
        ),
        "serving_pods_evicted": sum(
            1 for n in evicted if n in by_name and by_name[n].service in serving
        ),
        "pods_disrupted": len(disrupted),
        "nodes_emptied": emptied,
        "nodes_consolidated_moving_pods": moved,
    }


def _on(pod: PodSeen, node: str, at: float) -> bool:
    """Whether `pod` was running on `node` when its deletion began at `at` (and not already
    on its way out, as a scale-down's victim is)."""
    if pod.node != node or pod.bound is None or pod.bound > at:
        return False
    ended = pod.deleting if pod.deleting is not None else pod.gone
    return ended is None or ended >= at


def pending(
    seen: Seen, sizes: Mapping[str, int], end: float, k: float
) -> dict[str, dict[str, float | int | None]]:
    """Scale-up pending (created to bound) per GPU size, on the trace's clock in seconds, and
    how many of those pods waited for a node that did not exist when they were created."""
    out: dict[str, dict[str, float | int | None]] = {}
    added = {n.name: n.added for n in seen.nodes.values()}
    for size in sorted(set(sizes.values())):
        bound = [
            p
            for p in seen.pods.values()
            if sizes.get(p.service) == size and 0 <= p.added <= end and p.bound is not None
        ]
        waits = [(p.bound - p.added) * k for p in bound if p.bound is not None]
        never = sum(
            1
            for p in seen.pods.values()
            if sizes.get(p.service) == size
            and 0 <= p.added <= end
            and p.bound is None
            and p.gone is None
        )
        p50, p95 = percentile(waits, 50), percentile(waits, 95)
        out[str(size)] = {
            "pods": len(waits),
            "p50_s": None if p50 is None else round(p50, 1),
            "p95_s": None if p95 is None else round(p95, 1),
            "never_bound": never,
            "on_new_node": sum(1 for p in bound if added.get(p.node, p.added) > p.added),
        }
    return out


def series(seen: Seen, plan: Plan, catalog: Catalog, step: float = 10.0) -> dict[str, list[float]]:
    """Every `step` replay seconds: GPU and CPU nodes alive, bound serving pods and the
    dollars spent so far (trace clock)."""
    prices = catalog.by_name()
    serving = {s.name for s in plan.services if s.gpus}
    times = [i * step for i in range(int(plan.duration // step) + 1)]
    out: dict[str, list[float]] = {
        "t_hours": [],
        "gpu_nodes": [],
        "cpu_nodes": [],
        "serving_pods": [],
        "dollars": [],
    }
    for t in times:
        alive = [n for n in seen.nodes.values() if n.added <= t and (n.gone is None or n.gone > t)]
        pods = [
            p
            for p in seen.pods.values()
            if p.service in serving
            and p.bound is not None
            and p.bound <= t
            and (p.gone is None or p.gone > t)
        ]
        spent = sum(
            _alive(n.added, n.gone, t) / 3600 * prices[n.instance_type].prices.get(n.capacity, 0.0)
            for n in seen.nodes.values()
            if n.instance_type in prices
        )
        out["t_hours"].append(round(plan.trace_seconds(t) / 3600, 3))
        out["gpu_nodes"].append(sum(1 for n in alive if n.gpus))
        out["cpu_nodes"].append(sum(1 for n in alive if not n.gpus))
        out["serving_pods"].append(len(pods))
        out["dollars"].append(round(spent * plan.timers.compression, 2))
    return out


def lane_figures(
    seen: Seen, evictions: Sequence[Eviction], plan: Plan, catalog: Catalog
) -> dict[str, object]:
    end, k = plan.duration, plan.timers.compression
    sizes = {s.name: s.gpus for s in plan.services}
    serving = {s.name for s in plan.services if s.gpus}
    nodes = node_figures(seen.nodes.values(), catalog, end, k)
    needed = needed_gpu_hours(plan)
    launched = sum(1 for n in seen.nodes.values() if 0 <= n.added <= end)
    return {
        **nodes,
        "gpu_hours_needed": round(needed, 1),
        "provisioned_over_needed": round(nodes["gpu_hours_provisioned"] / needed, 3)
        if needed
        else None,
        **disruption(seen, evictions, serving, end),
        "nodes_launched": launched,
        "nodes_at_start": sum(
            1 for n in seen.nodes.values() if n.added < 0 and (n.gone is None or n.gone > 0)
        ),
        "pending_by_gpus": pending(seen, sizes, end, k),
        "watch_errors": len(seen.errors),
        "pods": pods_seen(seen),
    }


def pods_seen(seen: Seen) -> dict[str, object]:
    """Which scheduler the lane's pods named, and how many ever carried a deletion cost."""
    by_scheduler: dict[str, int] = {}
    for p in seen.pods.values():
        by_scheduler[p.scheduler] = by_scheduler.get(p.scheduler, 0) + 1
    return {
        "total": len(seen.pods),
        "by_scheduler": by_scheduler,
        "costed": sum(1 for p in seen.pods.values() if p.costed),
    }


def write_audit(events: Sequence[AuditEvent], seen: Seen, namespace: str) -> dict[str, object]:
    """The whole run's audit of the operator's writes while Karpenter removed nodes: writes
    to pods and nodes whose deletion had begun or that were already removed, writes outside
    what it owns, and deletion costs that changed hands more than once.

    Judged on the apiserver's clock alone (write_checks.writes_to_gone): the watches say
    which objects were removed, by UID, but not when, so no watcher time enters the
    judgement."""
    removed = {uid for uid, p in seen.pods.items() if p.gone is not None}
    removed |= {uid for uid, n in seen.nodes.items() if n.gone is not None}
    attempts = write_checks.operator_attempts(events)
    to_gone = write_checks.writes_to_gone(events, removed)
    unowned = write_checks.unowned_writes(attempts, RELEASE_NAMESPACE)
    hands = write_checks.changed_hands(events, [namespace])
    return {
        "writes": len(attempts),
        **asdict(to_gone),
        "to_gone": to_gone.to_gone,
        "gone_clock": "apiserver",
        "unowned": len(unowned),
        "unowned_examples": unowned[:5],
        "changed_hands_twice": len(hands),
        "changed_hands_examples": dict(list(hands.items())[:5]),
    }
