"""What every envelope pod's cost should be, recomputed by the pure core from a fresh listing
of the cluster (the same view the controller builds, built apart from it), against what
the apiserver stores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.envelope.api import Api
from bench.envelope.fleet import LABEL
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.view import snapshot
from schedpolicy.view.deletion_cost import decisions


@dataclass(frozen=True)
class Costs:
    """uid -> (namespace/name, stored cost or None, expected cost or None)."""

    costs: dict[str, tuple[str, str | None, str | None]]


def wrong(costs: Costs) -> list[str]:
    """The pods whose stored cost is not the one the pure core gives."""
    return [uid for uid, (_, stored, want) in costs.costs.items() if stored != want]


async def expected(api: Api, policy: dict[str, Any]) -> Costs:
    nodes = [n async for n in api.pages("/api/v1/nodes")]
    namespaces = [n async for n in api.pages("/api/v1/namespaces")]
    ours = [
        n["metadata"]["name"]
        for n in namespaces
        if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in LABEL.items())
    ]
    # Pods go into the view a page at a time and are dropped: at 150k pods the listed
    # objects would take more memory than the view's compact records.
    view = snapshot.build_view(policies=[policy], nodes=nodes, namespaces=namespaces)
    stored: dict[str, str | None] = {}
    for ns in ours:
        async for pod in api.pages(f"/api/v1/namespaces/{ns}/pods"):
            meta = pod["metadata"]
            stored[meta["uid"]] = (meta.get("annotations") or {}).get(COST_ANNOTATION)
            view.upsert_pod(pod)
    out = {}
    for uid, final in decisions.expected_costs(view).items():
        record = view.pods[uid]
        want = None if final is None else str(final)
        out[uid] = (f"{record.namespace}/{record.name}", stored.get(uid), want)
    return Costs(out)
