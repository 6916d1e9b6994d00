"""The decisions for one pod or node, given a view of the cluster. Pure.

The reconciler runs them on its live view; `explain`, tests and benchmarks run them on a
view built from a one-off snapshot (`build_view`), so all of them agree by construction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schedpolicy.core import costs, gpu, matching
from schedpolicy.core.wellknown import FIELD_MANAGER
from schedpolicy.view.cluster import ClusterView, PodRecord


def build_view(
    *,
    policies: Iterable[Mapping[str, Any]] = (),
    nodes: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    namespaces: Iterable[Mapping[str, Any]] = (),
    replicasets: Iterable[Mapping[str, Any]] = (),
) -> ClusterView:
    view = ClusterView()
    view.stop_tracking()
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


@dataclass(frozen=True)
class PodCost:
    pod: PodRecord
    match: matching.Match
    decision: costs.CostDecision | None
    plan: costs.CostPlan


def pod_cost(
    view: ClusterView,
    pod: PodRecord,
    now: datetime | None = None,
    policies: list[matching.Policy] | None = None,
) -> PodCost:
    """The governing policy, the decision and what the operator would do, for one pod."""
    now = now or datetime.now(UTC)
    ns_labels = view.namespaces.get(pod.namespace, {})
    candidates = view.policies() if policies is None else policies
    match = matching.governing_policy(candidates, "deletionCost", pod.labels, ns_labels)
    policy = match.policy
    spec = policy.spec.deletion_cost if policy is not None else None
    decision = None
    if policy is not None and spec is not None and pod.replicaset_uid is not None:
        decision = costs.decide(spec, view.cost_inputs(pod, policy), now)
    state = costs.PodCostState(
        replicaset_owned=pod.replicaset_uid is not None,
        active=pod.active,
        scheduled=pod.node_name is not None,
        current=pod.cost,
        ours=FIELD_MANAGER in pod.cost_managers,
    )
    return PodCost(
        pod, match, decision, costs.plan(state, policy.name if policy else None, spec, decision)
    )


def expected_costs(view: ClusterView, now: datetime | None = None) -> dict[str, int | None]:
    """pod UID -> the cost the operator should leave on it (None: it should carry none of ours),
    once it is bound to a node; until then the operator leaves its cost alone."""
    out: dict[str, int | None] = {}
    for uid, pod in view.pods.items():
        result = pod_cost(view, pod, now)
        out[uid] = result.decision.final if result.decision is not None else None
    return out


@dataclass(frozen=True)
class NodeLabelResult:
    match: matching.Match
    decision: gpu.LabelDecision | None
    plan: gpu.LabelPlan


def node_labels(
    view: ClusterView, name: str, policies: list[matching.Policy] | None = None
) -> NodeLabelResult:
    node = view.nodes[name]
    candidates = view.policies() if policies is None else policies
    match = matching.governing_node_policy(candidates, node.labels)
    decision = None
    allow = False
    if match.policy is not None and match.policy.spec.node_labels is not None:
        spec = match.policy.spec.node_labels.gpu
        decision = gpu.decide(spec, node.labels, node.allocatable_gpus)
        allow = spec.allow_overwrite
    desired = decision.labels if decision else {}
    change = gpu.plan(desired, node.labels, node.annotations, node.label_managers, allow)
    return NodeLabelResult(match, decision, change)
