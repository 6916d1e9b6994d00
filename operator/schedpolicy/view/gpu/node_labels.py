"""A node's GPU labels, given a view of the cluster: the governing policy, the decision and
the change. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from schedpolicy.core.gpu import label_rules as gpu
from schedpolicy.core.policy import matching
from schedpolicy.view.cluster import ClusterView


@dataclass(frozen=True)
class NodeLabelResult:
    match: matching.Match
    decision: gpu.LabelDecision | None
    plan: gpu.LabelPlan


def node_labels(
    view: ClusterView,
    name: str,
    policies: list[matching.Policy] | None = None,
    admitted: frozenset[str] | None = None,
) -> NodeLabelResult:
    node = view.nodes[name]
    candidates = view.policies() if policies is None else policies
    match = matching.governing_node_policy(candidates, node.labels)
    decision = None
    allow = False
    if match.policy is not None and match.policy.spec.node_labels is not None:
        spec = match.policy.spec.node_labels.gpu
        devices = view.devices.published(name)
        decision = gpu.decide(spec, node.labels, node.allocatable_gpus, admitted, devices)
        allow = spec.allow_overwrite
    desired = decision.labels if decision else {}
    change = gpu.plan(desired, node.labels, node.annotations, node.label_managers, allow)
    return NodeLabelResult(match, decision, change)
