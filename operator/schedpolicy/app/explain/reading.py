"""Reading the cluster once for `explain` and `simulate`, and the text table they print."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schedpolicy.core import api, wellknown
from schedpolicy.core.deletion_cost import karpenter_gate
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.kube_errors import Forbidden, Gone
from schedpolicy.view import snapshot
from schedpolicy.view.cluster import ClusterView

POLICIES = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"


class ExplainError(RuntimeError):
    """Something the user can fix: a missing object, or credentials that may not read it."""


async def get(kube: Kube, path: str, what: str) -> dict[str, Any]:
    try:
        return await kube.get(path)
    except Gone:
        raise ExplainError(f"{what} not found") from None
    except Forbidden as err:
        raise ExplainError(f"not allowed to read {what}: {err.reason} (check your RBAC)") from None


async def items(kube: Kube, path: str, what: str, **query: str) -> list[dict[str, Any]]:
    try:
        return await kube.items(path, **query)
    except Forbidden as err:
        raise ExplainError(f"not allowed to list {what}: {err.reason} (check your RBAC)") from None


def split(ref: str, kind: str) -> tuple[str, str]:
    if "/" not in ref:
        raise ExplainError(f"{kind} must be given as NAMESPACE/NAME, not {ref!r}")
    namespace, name = ref.split("/", 1)
    return namespace, name


def our_write_time(meta: Mapping[str, Any]) -> str | None:
    for entry in meta.get("managedFields") or []:
        if entry.get("manager") == wellknown.FIELD_MANAGER and "f:annotations" in (
            (entry.get("fieldsV1") or {}).get("f:metadata") or {}
        ):
            return str(entry.get("time"))
    return None


async def pod_view(kube: Kube, pod: Mapping[str, Any]) -> ClusterView:
    """What the decision about `pod` reads: the policies, the nodes, its namespace, the
    pods on its node (fill) and in its namespace (its ReplicaSet's zone spread)."""
    namespace = pod["metadata"]["namespace"]
    node_name = (pod.get("spec") or {}).get("nodeName")
    policies = await items(kube, POLICIES, "SchedulingPolicies")
    nodes = await items(kube, "/api/v1/nodes", "nodes")
    ns = await get(kube, f"/api/v1/namespaces/{namespace}", f"namespace {namespace}")
    neighbours = (
        await items(kube, "/api/v1/pods", "pods", fieldSelector=f"spec.nodeName={node_name}")
        if node_name
        else []
    )
    siblings = await items(kube, f"/api/v1/namespaces/{namespace}/pods", "pods")
    seen = {p["metadata"]["uid"]: p for p in [*neighbours, *siblings, pod]}
    view = snapshot.build_view(
        policies=policies,
        nodes=nodes,
        namespaces=[ns],
        pods=seen.values(),
        **await dra_snapshot(kube, node_name),
    )
    # The controller may have seen Karpenter's gate where this snapshot does not look.
    for obj in view.policy_objects():
        view.karpenter_gate.see(karpenter_gate.from_status(obj.name, obj.status))
    return view


async def dra_snapshot(kube: Kube, node_name: str | None) -> dict[str, list[dict[str, Any]]]:
    """The node's ResourceSlices, the DeviceClasses and the claims: what its DRA fill and
    its DRA labels read. Claims cannot be selected by node, so all are read."""
    if node_name is None:
        return {}
    base = "/apis/resource.k8s.io/v1"
    return {
        "resource_slices": await items(
            kube,
            f"{base}/resourceslices",
            "ResourceSlices",
            fieldSelector=f"spec.nodeName={node_name}",
        ),
        "resource_claims": await items(kube, f"{base}/resourceclaims", "ResourceClaims"),
        "device_classes": await items(kube, f"{base}/deviceclasses", "DeviceClasses"),
    }


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
