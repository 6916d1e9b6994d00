"""The merge patch that sets and removes a node's GPU labels, guarded by its UID. Pure;
shell/kube.py sends it."""

from __future__ import annotations

from schedpolicy.core.gpu.label_rules import LabelPlan
from schedpolicy.core.wellknown import OWNED_LABELS_ANNOTATION


def node_label_patch(uid: str, plan: LabelPlan) -> dict[str, object]:
    """A JSON merge patch; `metadata.uid` makes it apply to this very node or fail (409)."""
    labels: dict[str, str | None] = {**plan.set, **dict.fromkeys(plan.remove)}
    meta: dict[str, object] = {"uid": uid}
    if labels:
        meta["labels"] = labels
    if plan.owned_changed:
        meta["annotations"] = {OWNED_LABELS_ANNOTATION: ",".join(plan.owned) or None}
    return {"metadata": meta}
