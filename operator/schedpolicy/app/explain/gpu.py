"""`schedpolicy explain node`: a node's GPU labels, the source that gave them and what would
change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schedpolicy.app.explain.reading import (
    POLICIES,
    dra_snapshot,
    get,
    items,
    table,
)
from schedpolicy.core.gpu.label_rules import label_keys, parse_owned
from schedpolicy.core.wellknown import (
    OWNED_LABELS_ANNOTATION,
)
from schedpolicy.shell.kube import Kube
from schedpolicy.view import snapshot
from schedpolicy.view.gpu import node_labels as gpu_labels


async def explain_node(kube: Kube, name: str) -> dict[str, Any]:
    node = await get(kube, f"/api/v1/nodes/{name}", f"node {name}")
    policies = await items(kube, POLICIES, "SchedulingPolicies")
    view = snapshot.build_view(policies=policies, nodes=[node], **await dra_snapshot(kube, name))
    result = gpu_labels.node_labels(view, name)
    record = view.nodes[name]
    published = view.devices.published(name)
    decision = result.decision
    keys: tuple[str, ...] = ()
    if result.match.policy and result.match.policy.spec.node_labels:
        keys = label_keys(result.match.policy.spec.node_labels.gpu.label_prefix)
    return {
        "node": name,
        "allocatableGPUs": record.allocatable_gpus,
        "draDevices": None
        if published is None
        else {
            "devices": [f"{d.driver}/{d.pool}/{d.name}" for d in published.devices],
            "problems": list(published.problems),
            "incomplete": list(published.incomplete),
            "claims": [
                {"claim": a.claim, "device": "/".join(a.key), "extendedResource": a.extended}
                for a in view.devices.claims_on(name)
            ],
        },
        "policy": {
            "name": result.match.policy.name if result.match.policy else None,
            "why": result.match.reason,
            "candidates": list(result.match.candidates),
        },
        "decision": None
        if decision is None
        else {
            "labels": dict(decision.labels),
            "source": decision.facts.source if decision.facts else None,
            "explanation": list(decision.explanation),
            "disagreements": list(decision.disagreements),
            "refused": decision.error,
            "refusals": [
                {"source": r.source, "reason": r.reason, "message": r.message}
                for r in decision.refusals
            ],
        },
        "current": {k: record.labels.get(k) for k in keys},
        "owned": sorted(parse_owned(node["metadata"].get("annotations") or {})),
        "ownedAnnotation": OWNED_LABELS_ANNOTATION,
        "managers": {
            k: sorted(record.label_managers.get(k, ())) for k in keys if k in record.labels
        },
        "pending": {"set": dict(result.plan.set), "remove": list(result.plan.remove)},
        "conflicts": list(result.plan.conflicts),
    }


def render_node(out: Mapping[str, Any]) -> str:
    lines = [
        f"Node:      {out['node']}  (allocatable GPUs: {out['allocatableGPUs']})",
        f"Policy:    {out['policy']['name'] or '(none)'}",
        f"  why:     {out['policy']['why']}",
    ]
    decision = out["decision"]
    if decision:
        lines += [f"  {line}" for line in decision["explanation"]]
        lines += [f"  disagreement: {d}" for d in decision["disagreements"]]
        if decision["refused"]:
            lines.append(f"  refused: {decision['refused']}")
        lines += [
            f"  refused by {r['source']} ({r['reason']}): {r['message']}"
            for r in decision["refusals"]
        ]
    rows = [["LABEL", "WANTED", "CURRENT", "SET BY"]]
    wanted = decision["labels"] if decision else {}
    for key in sorted(set(wanted) | set(out["current"])):
        rows.append(
            [
                key,
                wanted.get(key, "-"),
                out["current"].get(key) or "-",
                ",".join(out["managers"].get(key, [])) or "-",
            ]
        )
    if len(rows) > 1:
        lines += ["", table(rows)]
    lines.append(f"Owned:     {', '.join(out['owned']) or '(none)'}  ({out['ownedAnnotation']})")
    lines += [f"Conflict:  {c}" for c in out["conflicts"]]
    pending = out["pending"]
    if pending["set"] or pending["remove"]:
        lines.append(f"Pending:   set {pending['set']} remove {pending['remove']}")
    return "\n".join(lines)
