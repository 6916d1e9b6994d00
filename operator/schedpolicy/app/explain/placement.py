"""A pod's placement hints, explained: what the webhook or the compiled policy injected, by
which policy, and through which admission path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from schedpolicy.core import timestamps
from schedpolicy.core.placement import routing as admission_routing
from schedpolicy.core.wellknown import HINTS_ANNOTATION
from schedpolicy.view.cluster import ClusterView


def hints_section(
    view: ClusterView, meta: Mapping[str, Any], now: datetime
) -> dict[str, Any] | None:
    """The pod's hints record, with the admission path that served its policy then."""
    recorded = (meta.get("annotations") or {}).get(HINTS_ANNOTATION)
    if not recorded:
        return None
    hints: dict[str, Any] = json.loads(recorded)
    by = {o.name: o for o in view.policy_objects()}.get(str(hints.get("policy")))
    status = by.status if by is not None else {}
    created = str(meta.get("creationTimestamp") or timestamps.render(now))
    hints["admission"] = admission_routing.hinted_by(status, created)
    return hints


def render_hints(hints: Mapping[str, Any] | None) -> list[str]:
    lines: list[str] = []
    lines.append(
        f"Hints:     {', '.join(hints['injected'])} by {hints['policy']}"
        if hints
        else "Hints:     (none recorded)"
    )
    if hints and hints.get("admission"):
        path = hints["admission"]
        lines.append(f"           through {path['path']} ({path['why']})")
    return lines
