"""A view built from a one-off snapshot of objects, for `explain`, tests and benchmarks: the
same view the reconciler keeps from its watches, so their decisions agree. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from schedpolicy.view.cluster import ClusterView


def build_view(
    *,
    policies: Iterable[Mapping[str, Any]] = (),
    nodes: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    namespaces: Iterable[Mapping[str, Any]] = (),
    replicasets: Iterable[Mapping[str, Any]] = (),
    resource_slices: Iterable[Mapping[str, Any]] = (),
    resource_claims: Iterable[Mapping[str, Any]] = (),
    device_classes: Iterable[Mapping[str, Any]] = (),
) -> ClusterView:
    view = ClusterView()
    for body in device_classes:
        view.devices.upsert_class(body)
    for body in resource_slices:
        view.devices.upsert_slice(body)
    for body in resource_claims:
        view.devices.upsert_claim(body)
    for body in policies:
        view.upsert_policy(body)
    for body in nodes:
        view.upsert_node(body)
    for body in namespaces:
        meta = body["metadata"]
        view.upsert_namespace(meta["name"], meta.get("labels") or {})
    for body in replicasets:
        view.upsert_replicaset(body)
    for body in pods:
        view.upsert_pod(body)
    return view
