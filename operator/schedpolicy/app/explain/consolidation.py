"""`schedpolicy simulate scale-down`: which replicas the ReplicaSet controller would remove, in its
order, with the costs the operator would write."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from schedpolicy.app.explain.reading import (
    ExplainError,
    get,
    items,
    split,
    table,
)
from schedpolicy.core.consolidation import ranking
from schedpolicy.core.timestamps import to_nanos
from schedpolicy.core.wellknown import (
    REVISION_ANNOTATION,
    controller_ref,
)
from schedpolicy.core.wording import count
from schedpolicy.shell.kube import Kube


async def simulate_scale_down(
    kube: Kube, ref: str, replicas: int, now: datetime | None = None
) -> dict[str, Any]:
    namespace, name = split(ref, "deployment")
    deploy = await get(
        kube, f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", f"deployment {ref}"
    )
    owned = [
        rs
        for rs in await items(
            kube, f"/apis/apps/v1/namespaces/{namespace}/replicasets", "ReplicaSets"
        )
        if (controller_ref(rs["metadata"]) or {}).get("uid") == deploy["metadata"]["uid"]
    ]
    if not owned:
        raise ExplainError(f"deployment {ref} has no ReplicaSet yet")
    current = max(
        owned,
        key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0")),
    )
    rs_uids = {rs["metadata"]["uid"] for rs in owned}
    pods = await items(kube, f"/api/v1/namespaces/{namespace}/pods", "pods")

    def owner(p: Mapping[str, Any]) -> str | None:
        ref = controller_ref(p["metadata"])
        return ref["uid"] if ref else None

    related = [p for p in pods if owner(p) in rs_uids]
    mine = [p for p in related if owner(p) == current["metadata"]["uid"] and ranking.is_active(p)]
    # The controller's clock has nanoseconds, and so does the ranking's log2 age scale.
    nanos = to_nanos(now) if now is not None else time.time_ns()
    result = ranking.scale_down(ranking.rank_pods(mine, related), replicas, nanos)
    uncertainty = result.uncertainty
    return {
        "deployment": ref,
        "replicaSet": current["metadata"]["name"],
        "from": len(mine),
        "to": replicas,
        "certain": result.certain,
        "uncertain": None
        if uncertainty is None
        else {
            "candidates": [p.name for p in uncertainty.candidates],
            "deleted": uncertainty.deleted,
            "why": uncertainty.why,
        },
        "deleted": [_row(i + 1, v.pod, v.reason) for i, v in enumerate(result.victims)],
        "kept": [_row(len(result.victims) + i + 1, p, "") for i, p in enumerate(result.survivors)],
    }


def _row(order: int, pod: ranking.RankedPod, reason: str) -> dict[str, Any]:
    return {
        "order": order,
        "pod": pod.name,
        "node": pod.node or None,
        "phase": pod.phase,
        "ready": pod.ready,
        "cost": pod.cost,
        "sameNode": pod.rank,
        "restarts": pod.restarts[0],
        "reason": reason,
    }


def render_simulation(out: Mapping[str, Any]) -> str:
    rows = [
        [
            "ORDER",
            "POD",
            "NODE",
            "PHASE",
            "READY",
            "COST",
            "SAME-NODE",
            "RESTARTS",
            "DELETED BECAUSE",
        ]
    ]
    for r in [*out["deleted"], *out["kept"]]:
        rows.append(
            [
                str(r["order"]),
                r["pod"],
                r["node"] or "-",
                r["phase"],
                "yes" if r["ready"] else "no",
                str(r["cost"]),
                str(r["sameNode"]),
                str(r["restarts"]),
                r["reason"] or "(kept)",
            ]
        )
    head = (
        f"Scaling {out['deployment']} (ReplicaSet {out['replicaSet']})"
        f" from {out['from']} to {out['to']} deletes {count(len(out['deleted']), 'pod')}:"
    )
    tail = ""
    if not out["certain"]:
        doubt = out["uncertain"]
        tail = (
            f"\nUncertain: the controller deletes {doubt['deleted']} of"
            f" {', '.join(doubt['candidates'])}, and which depends on the order it lists them"
            f" ({doubt['why']})."
        )
    return f"{head}\n{table(rows)}{tail}"
