"""A pod's deletion cost, explained: each signal's points, the node's fill, the stored value
and whether a write is due, as the controller's own decision and write gate see them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp

from schedpolicy.app.explain.reading import (
    table,
)
from schedpolicy.core.consolidation import fill
from schedpolicy.core.deletion_cost import costs, write_gate
from schedpolicy.core.deletion_cost.signals.metric import MetricSignal
from schedpolicy.core.policy import matching
from schedpolicy.core.timestamps import render, seconds_since
from schedpolicy.shell.deletion_cost.scraper import read_endpoint
from schedpolicy.view.cluster import ClusterView, PodRecord


def signal_json(signal: costs.SignalPoints) -> dict[str, Any]:
    out: dict[str, Any] = {"type": signal.type, "points": signal.points, "detail": signal.detail}
    if signal.devices is not None:
        share = signal.devices
        out["devices"] = {
            "classes": list(share.classes),
            "published": len(share.published),
            "allocated": [
                {"claim": a.claim, "request": a.request, "device": "/".join(a.key)}
                for a in share.allocated
            ],
            "extendedResourceClaims": [
                {"claim": a.claim, "device": "/".join(a.key)} for a in share.extended
            ],
            "unread": list(share.unread),
        }
    if signal.fill is not None:
        out["fill"] = {
            "value": float(signal.fill.fill),
            "dominant": signal.fill.dominant,
            "tiedWith": list(signal.fill.tied),
            "shares": [
                {
                    "resource": share.resource,
                    "requested": fill.amount(share.resource, share.requested),
                    "allocatable": fill.amount(share.resource, share.allocatable)
                    if share.advertised
                    else None,
                    "share": float(share.share) if share.advertised else None,
                }
                for share in signal.fill.shares
            ],
        }
    return out


async def read_endpoints(view: ClusterView, pod: PodRecord) -> list[str]:
    """Metric signals read from the pod's endpoint: the operator keeps its readings in memory,
    so explain takes a reading of its own. Returns the URLs it read."""
    policy = matching.governing_policy(
        view.policies(), "deletionCost", pod.labels, view.namespaces.get(pod.namespace, {})
    ).policy
    spec = policy.spec.deletion_cost if policy else None
    metrics = [s.params() for s in (spec.signals if spec else ())]
    sources = [
        m.prometheus for m in metrics if isinstance(m, MetricSignal) and m.prometheus is not None
    ]
    if not sources or pod.pod_ip is None:
        return []
    async with aiohttp.ClientSession(trust_env=False) as session:
        for src in sources:
            reading = await read_endpoint(session, pod.pod_ip, src)
            view.record_sample((pod.uid, src.port, src.path, src.metric), reading)
    return [f"http://{pod.pod_ip}:{src.port}{src.path}" for src in sources]


def write_state(
    plan: Any, stored: Mapping[str, Any], policy: matching.Policy | None, now: datetime
) -> dict[str, Any]:
    """The controller's write gate, asked with the time managedFields say we last wrote."""
    since = seconds_since(stored.get("writtenAt"), now)
    gate = write_gate.cost_gate(
        plan,
        awaiting_echo=False,
        in_flight=False,
        last_write=now.timestamp() - since if since is not None else None,
        interval=write_gate.min_interval(policy),
        now=now.timestamp(),
    )
    if gate.verdict == "idle":
        return {"pending": False, "reason": plan.label}
    state: dict[str, Any] = {
        "pending": True,
        "action": plan.action,
        "value": plan.value,
        "karpenter": plan.karpenter,
        "rateLimited": gate.verdict == "wait",
    }
    if gate.not_before is not None:
        state["notBefore"] = render(datetime.fromtimestamp(gate.not_before, UTC))
    return state


def shares_table(fill: Mapping[str, Any]) -> str:
    rows = [["RESOURCE", "REQUESTED", "ALLOCATABLE", "SHARE", ""]] + [
        [
            x["resource"],
            x["requested"],
            x["allocatable"] or "(not advertised)",
            f"{x['share']:.2f}" if x["share"] is not None else "skipped",
            "dominant" if x["resource"] == fill["dominant"] else "",
        ]
        for x in fill["shares"]
    ]
    return table(rows)


def pending_line(write: Mapping[str, Any]) -> str:
    if not write["pending"]:
        return f"Pending:   nothing ({write['reason']})"
    when = f", rate-limited until {write['notBefore']}" if write.get("rateLimited") else ""
    if write.get("value") is None and write.get("karpenter"):
        # Karpenter's gate owns pod-deletion-cost here: only the disruption cost goes.
        return f"Pending:   write karpenter.sh/disruption-cost {write['karpenter']} only{when}"
    extra = f" (disruption-cost {write['karpenter']})" if write.get("karpenter") else ""
    return f"Pending:   {write['action']} {write.get('value')}{extra}{when}"
