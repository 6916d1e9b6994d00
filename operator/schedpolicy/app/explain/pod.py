"""`schedpolicy explain pod`: the governing policy, the deletion cost and the hints of one pod."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from schedpolicy.app.explain import placement
from schedpolicy.app.explain.deletion_cost import (
    pending_line,
    read_endpoints,
    shares_table,
    signal_json,
    write_state,
)
from schedpolicy.app.explain.reading import (
    get,
    our_write_time,
    pod_view,
    split,
    table,
)
from schedpolicy.core import wellknown
from schedpolicy.core.consolidation import ranking
from schedpolicy.core.deletion_cost import costs, karpenter_gate
from schedpolicy.core.policy import matching
from schedpolicy.core.wellknown import (
    COST_ANNOTATION,
    KARPENTER_COST_ANNOTATION,
)
from schedpolicy.shell.kube import Kube
from schedpolicy.view.cluster import ClusterView, annotation_managers
from schedpolicy.view.deletion_cost import decisions


async def explain_pod(kube: Kube, ref: str, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    namespace, name = split(ref, "pod")
    pod = await get(kube, f"/api/v1/namespaces/{namespace}/pods/{name}", f"pod {ref}")
    node_name = (pod.get("spec") or {}).get("nodeName")
    view = await pod_view(kube, pod)
    record = view.pods[pod["metadata"]["uid"]]
    read = await read_endpoints(view, record)
    result = decisions.pod_cost(view, record, now)
    conflicts = matching.conflicts(view.policies())

    meta = pod["metadata"]
    stored = (meta.get("annotations") or {}).get(COST_ANNOTATION)
    managers = annotation_managers(meta.get("managedFields") or [], COST_ANNOTATION)
    ours = wellknown.FIELD_MANAGER in managers
    decision = result.decision
    policy = result.match.policy
    out: dict[str, Any] = {
        "pod": f"{namespace}/{name}",
        "uid": meta["uid"],
        "owner": f"{record.owner_kind}/{record.owner_name}" if record.owner_kind else None,
        "node": node_name,
        "policy": {
            "name": policy.name if policy else None,
            "why": result.match.reason,
            "candidates": list(result.match.candidates),
            "conflicts": [c.describe() for c in conflicts.get(policy.name, [])] if policy else [],
        },
        "stored": {
            "value": stored,
            # What the ReplicaSet controller ranks by: 0 for text its parser refuses.
            "readAs": ranking.read_deletion_cost(stored),
            "ours": ours,
            "managers": sorted(managers),
            "writtenAt": our_write_time(meta) if ours else None,
            "karpenter": (meta.get("annotations") or {}).get(KARPENTER_COST_ANNOTATION),
        },
    }
    if decision is not None:
        out["cost"] = {
            "signals": [signal_json(s) for s in decision.signals],
            "sum": decision.raw,
            "bucket": decision.bucket,
            "bucketed": decision.bucketed,
            "bounds": list(decision.bounds),
            "final": decision.final,
            "held": decision.hold.detail if decision.hold else None,
            "karpenter": decision.karpenter,
            "explanation": decision.explain(),
            "endpointsRead": read,
        }
    out["write"] = write_state(result.plan, out["stored"], policy, now)
    out["yielded"] = yielded(view, result.plan, str(node_name))
    out["hints"] = placement.hints_section(view, meta, now)
    return out


def yielded(view: ClusterView, plan: costs.CostPlan, node: str) -> str | None:
    """Why no pod-deletion-cost is written here, when Karpenter's gate owns it."""
    policy = view.policy(plan.policy)
    spec = policy.spec.deletion_cost if policy else None
    sighting = view.karpenter_gate.sighting
    if not plan.yields or sighting is None or spec is None:
        return None
    steering = spec.karpenter_disruption_cost is not None
    return karpenter_gate.explain(sighting, node, spec.take_over, steering)


def render_pod(out: Mapping[str, Any]) -> str:
    lines = [
        f"Pod:       {out['pod']}  (uid {out['uid']})",
        f"Owner:     {out['owner'] or '-'}",
        f"Node:      {out['node'] or '-'}",
    ]
    pol = out["policy"]
    lines += [f"Policy:    {pol['name'] or '(none)'}", f"  why:     {pol['why']}"]
    lines += [f"  conflict: {c}" for c in pol["conflicts"]]
    cost = out.get("cost")
    if cost:
        rows = [["SIGNAL", "POINTS", "DETAIL"]] + [
            [s["type"], f"{s['points']:+d}", s["detail"]] for s in cost["signals"]
        ]
        lines += ["", table(rows)]
        for fill in (s["fill"] for s in cost["signals"] if s.get("fill")):
            lines += ["", f"Node fill {fill['value']:.2f}:", shares_table(fill)]
        lines += [
            "",
            f"Sum {cost['sum']:+d} -> bucket {cost['bucket']}: {cost['bucketed']:+d} -> "
            f"clamp [{cost['bounds'][0]}, {cost['bounds'][1]}]: {cost['final']}",
        ]
        if cost["held"]:
            lines.append(f"Held: {cost['held']} (the stored cost is kept)")
        if cost.get("karpenter") is not None:
            said = [e for e in cost["explanation"] if e.startswith("karpenter.sh/")]
            lines += [f"Karpenter: {e}" for e in said]
        lines += [
            f"Read now from {url} (the operator's own readings stay in memory)"
            for url in cost["endpointsRead"]
        ]
    stored = out["stored"]
    owner = (
        "schedpolicy"
        if stored["ours"]
        else (
            ", ".join(stored.get("managers") or ["someone else"])
            if stored["value"] is not None
            else "-"
        )
    )
    value = stored["value"] if stored["value"] is not None else "(none)"
    lines.append(f"Stored:    {value}  (written by {owner})")
    if stored.get("karpenter") is not None:
        lines.append(f"           karpenter.sh/disruption-cost {stored['karpenter']}")
    if stored["value"] is not None and str(stored["readAs"]) != stored["value"]:
        lines.append(f"           the ReplicaSet controller reads it as {stored['readAs']}")
    if out.get("yielded"):
        lines.append(f"Yielded:   {out['yielded']}")
    lines.append(pending_line(out["write"]))
    lines += placement.render_hints(out.get("hints"))
    return "\n".join(lines)
