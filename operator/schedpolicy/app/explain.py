"""`schedpolicy explain` and `schedpolicy simulate`: why a pod or node looks the way it does,
and which replicas a scale-down would remove. Reads the cluster once, then runs the same pure
functions the operator runs (decisions.py, ranking.py), so the answers cannot drift from what
the operator does."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp

from schedpolicy.core import api, timestamps, wellknown
from schedpolicy.core.consolidation import fill, ranking
from schedpolicy.core.deletion_cost import costs, write_gate
from schedpolicy.core.gpu.labels import label_keys, parse_owned
from schedpolicy.core.placement import routing as admission_routing
from schedpolicy.core.policy import matching
from schedpolicy.core.timestamps import render, seconds_since, to_nanos
from schedpolicy.core.wellknown import (
    COST_ANNOTATION,
    HINTS_ANNOTATION,
    KARPENTER_COST_ANNOTATION,
    OWNED_LABELS_ANNOTATION,
    REVISION_ANNOTATION,
    controller_ref,
)
from schedpolicy.core.wording import count
from schedpolicy.shell.deletion_cost.scraper import read_endpoint
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.kube_errors import Forbidden, Gone
from schedpolicy.view import snapshot
from schedpolicy.view.cluster import ClusterView, PodRecord, annotation_managers
from schedpolicy.view.deletion_cost import decisions
from schedpolicy.view.gpu import labels as gpu_labels

POLICIES = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"


class ExplainError(RuntimeError):
    """Something the user can fix: a missing object, or credentials that may not read it."""


async def _get(kube: Kube, path: str, what: str) -> dict[str, Any]:
    try:
        return await kube.get(path)
    except Gone:
        raise ExplainError(f"{what} not found") from None
    except Forbidden as err:
        raise ExplainError(f"not allowed to read {what}: {err.reason} (check your RBAC)") from None


async def _items(kube: Kube, path: str, what: str, **query: str) -> list[dict[str, Any]]:
    try:
        return await kube.items(path, **query)
    except Forbidden as err:
        raise ExplainError(f"not allowed to list {what}: {err.reason} (check your RBAC)") from None


def split(ref: str, kind: str) -> tuple[str, str]:
    if "/" not in ref:
        raise ExplainError(f"{kind} must be given as NAMESPACE/NAME, not {ref!r}")
    namespace, name = ref.split("/", 1)
    return namespace, name


def _our_write_time(meta: Mapping[str, Any]) -> str | None:
    for entry in meta.get("managedFields") or []:
        if entry.get("manager") == wellknown.FIELD_MANAGER and "f:annotations" in (
            (entry.get("fieldsV1") or {}).get("f:metadata") or {}
        ):
            return str(entry.get("time"))
    return None


async def _pod_view(kube: Kube, pod: Mapping[str, Any]) -> ClusterView:
    """What the decision about `pod` reads: the policies, the nodes, its namespace, the
    pods on its node (fill) and in its namespace (its ReplicaSet's zone spread)."""
    namespace = pod["metadata"]["namespace"]
    node_name = (pod.get("spec") or {}).get("nodeName")
    policies = await _items(kube, POLICIES, "SchedulingPolicies")
    nodes = await _items(kube, "/api/v1/nodes", "nodes")
    ns = await _get(kube, f"/api/v1/namespaces/{namespace}", f"namespace {namespace}")
    neighbours = (
        await _items(kube, "/api/v1/pods", "pods", fieldSelector=f"spec.nodeName={node_name}")
        if node_name
        else []
    )
    siblings = await _items(kube, f"/api/v1/namespaces/{namespace}/pods", "pods")
    seen = {p["metadata"]["uid"]: p for p in [*neighbours, *siblings, pod]}
    return snapshot.build_view(
        policies=policies,
        nodes=nodes,
        namespaces=[ns],
        pods=seen.values(),
        **await _dra_snapshot(kube, node_name),
    )


async def _dra_snapshot(kube: Kube, node_name: str | None) -> dict[str, list[dict[str, Any]]]:
    """The node's ResourceSlices, the DeviceClasses and the claims: what its DRA fill and
    its DRA labels read. Claims cannot be selected by node, so all are read."""
    if node_name is None:
        return {}
    base = "/apis/resource.k8s.io/v1"
    return {
        "resource_slices": await _items(
            kube,
            f"{base}/resourceslices",
            "ResourceSlices",
            fieldSelector=f"spec.nodeName={node_name}",
        ),
        "resource_claims": await _items(kube, f"{base}/resourceclaims", "ResourceClaims"),
        "device_classes": await _items(kube, f"{base}/deviceclasses", "DeviceClasses"),
    }


async def explain_pod(kube: Kube, ref: str, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    namespace, name = split(ref, "pod")
    pod = await _get(kube, f"/api/v1/namespaces/{namespace}/pods/{name}", f"pod {ref}")
    node_name = (pod.get("spec") or {}).get("nodeName")
    view = await _pod_view(kube, pod)
    record = view.pods[pod["metadata"]["uid"]]
    read = await _read_endpoints(view, record)
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
            "writtenAt": _our_write_time(meta) if ours else None,
            "karpenter": (meta.get("annotations") or {}).get(KARPENTER_COST_ANNOTATION),
        },
    }
    if decision is not None:
        out["cost"] = {
            "signals": [_signal(s) for s in decision.signals],
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
    out["write"] = _write_state(result.plan, out["stored"], policy, now)
    hints = (meta.get("annotations") or {}).get(HINTS_ANNOTATION)
    out["hints"] = json.loads(hints) if hints else None
    if out["hints"] is not None:
        by = {o.name: o for o in view.policy_objects()}.get(out["hints"].get("policy"))
        status = by.status if by is not None else {}
        created = str(meta.get("creationTimestamp") or timestamps.render(now))
        out["hints"]["admission"] = admission_routing.hinted_by(status, created)
    return out


def _signal(signal: costs.SignalPoints) -> dict[str, Any]:
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


async def _read_endpoints(view: ClusterView, pod: PodRecord) -> list[str]:
    """Metric signals read from the pod's endpoint: the operator keeps its readings in memory,
    so explain takes a reading of its own. Returns the URLs it read."""
    policy = matching.governing_policy(
        view.policies(), "deletionCost", pod.labels, view.namespaces.get(pod.namespace, {})
    ).policy
    spec = policy.spec.deletion_cost if policy else None
    sources = [
        s.metric.prometheus
        for s in (spec.signals if spec else ())
        if s.metric is not None and s.metric.prometheus is not None
    ]
    if not sources or pod.pod_ip is None:
        return []
    async with aiohttp.ClientSession(trust_env=False) as session:
        for src in sources:
            reading = await read_endpoint(session, pod.pod_ip, src)
            view.record_sample((pod.uid, src.port, src.path, src.metric), reading)
    return [f"http://{pod.pod_ip}:{src.port}{src.path}" for src in sources]


def _write_state(
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
        return {"pending": False, "reason": plan.reason}
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


async def explain_node(kube: Kube, name: str) -> dict[str, Any]:
    node = await _get(kube, f"/api/v1/nodes/{name}", f"node {name}")
    policies = await _items(kube, POLICIES, "SchedulingPolicies")
    view = snapshot.build_view(policies=policies, nodes=[node], **await _dra_snapshot(kube, name))
    result = gpu_labels.node_labels(view, name)
    record = view.nodes[name]
    published = view.devices.published(name)
    decision = result.decision
    keys: tuple[str, ...] = ()
    if result.match.policy and result.match.policy.spec.node_labels:
        keys = label_keys(result.match.policy.spec.node_labels.gpu)
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


async def simulate_scale_down(
    kube: Kube, ref: str, replicas: int, now: datetime | None = None
) -> dict[str, Any]:
    namespace, name = split(ref, "deployment")
    deploy = await _get(
        kube, f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", f"deployment {ref}"
    )
    owned = [
        rs
        for rs in await _items(
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
    pods = await _items(kube, f"/api/v1/namespaces/{namespace}/pods", "pods")

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


# ---- human output -------------------------------------------------------------------------


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _shares_table(fill: Mapping[str, Any]) -> str:
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
            lines += ["", f"Node fill {fill['value']:.2f}:", _shares_table(fill)]
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
    lines.append(_pending_line(out["write"]))
    hints = out.get("hints")
    lines.append(
        f"Hints:     {', '.join(hints['injected'])} by {hints['policy']}"
        if hints
        else "Hints:     (none recorded)"
    )
    if hints and hints.get("admission"):
        path = hints["admission"]
        lines.append(f"           through {path['path']} ({path['why']})")
    return "\n".join(lines)


def _pending_line(write: Mapping[str, Any]) -> str:
    if not write["pending"]:
        return f"Pending:   nothing ({write['reason']})"
    when = f", rate-limited until {write['notBefore']}" if write.get("rateLimited") else ""
    extra = f" (disruption-cost {write['karpenter']})" if write.get("karpenter") else ""
    return f"Pending:   {write['action']} {write.get('value')}{extra}{when}"


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
