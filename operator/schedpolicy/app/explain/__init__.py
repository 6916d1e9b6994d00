"""`schedpolicy explain` and `schedpolicy simulate`: why a pod or node looks the way it does,
and which replicas a scale-down would remove. Each reads the cluster once, then runs the same
pure functions the operator runs, so the answers cannot drift from what the operator does.
One module per capability: pod (deletion cost and hints), gpu (node labels), consolidation
(scale-down order)."""

from schedpolicy.app.explain.consolidation import render_simulation, simulate_scale_down
from schedpolicy.app.explain.gpu import explain_node, render_node
from schedpolicy.app.explain.pod import explain_pod, render_pod
from schedpolicy.app.explain.reading import ExplainError, table

__all__ = [
    "ExplainError",
    "explain_node",
    "explain_pod",
    "render_node",
    "render_pod",
    "render_simulation",
    "simulate_scale_down",
    "table",
]
