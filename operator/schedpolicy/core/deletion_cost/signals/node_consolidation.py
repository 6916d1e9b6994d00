"""NodeConsolidation: points by how full the pod's node is (core/consolidation/fill.py). Pure."""

from __future__ import annotations

from datetime import datetime

from schedpolicy.core.consolidation import fill
from schedpolicy.core.consolidation.api import NodeConsolidationSignal
from schedpolicy.core.deletion_cost.signals.base import PodFacts, Ripple, Score, SignalKind


def score(params: NodeConsolidationSignal, facts: PodFacts, now: datetime) -> Score:
    classes = tuple(params.device_classes)
    share = facts.device_share(classes) if classes and facts.node_name is not None else None
    points, detail, shares = fill.points(
        params, facts.node_name, facts.node_allocatable(), facts.node_requested(), share
    )
    return Score(points, detail, shares, share)


KIND = SignalKind(
    "NodeConsolidation",
    "nodeConsolidation",
    NodeConsolidationSignal,
    score,
    optional=True,
    node_fields=("allocatable",),
    # A pod's requests fill its node: the other pods there score differently.
    ripple=Ripple("node", when="counts_toward_fill", fields=("node_name", "requests")),
)
