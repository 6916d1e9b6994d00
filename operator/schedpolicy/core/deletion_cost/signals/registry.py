"""Every deletion-cost signal, in the order the CRD lists them. Adding a signal is one module
beside this one (its parameters, its scorer, what re-costs a pod) and one line here."""

from __future__ import annotations

from typing import Any

from schedpolicy.core.deletion_cost.signals import (
    capacity_type,
    metric,
    node_consolidation,
    pod_condition,
    zone_balance,
)
from schedpolicy.core.deletion_cost.signals.base import SignalKind

SIGNALS: tuple[SignalKind[Any], ...] = (
    capacity_type.KIND,
    node_consolidation.KIND,
    zone_balance.KIND,
    pod_condition.KIND,
    metric.KIND,
)
BY_NAME: dict[str, SignalKind[Any]] = {kind.name: kind for kind in SIGNALS}
