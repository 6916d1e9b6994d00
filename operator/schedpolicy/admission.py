"""Which pod gets which hints at admission: the glue between the view and hints.py."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from schedpolicy import hints, matching
from schedpolicy.cluster import ClusterView

IGNORE_LABEL = "schedpolicy.io/ignore"
# The chart's own pods, by the labels it gives them: never hinted, even with the ignore label
# stripped (the scheduler would wait on its own profile).
PRODUCT_NAME = ("app.kubernetes.io/name", "schedpolicy")
PRODUCT_COMPONENTS = frozenset({"operator", "scheduler", "webhook"})


def is_own_pod(labels: Mapping[str, str]) -> bool:
    key, name = PRODUCT_NAME
    return labels.get(key) == name and labels.get("app.kubernetes.io/component") in (
        PRODUCT_COMPONENTS
    )


def hints_for(
    pod: Mapping[str, Any], view: ClusterView, excluded_namespaces: Collection[str]
) -> hints.HintDecision | None:
    """The hints for a pod being created, or None when no policy places it.

    The webhook configuration already skips excluded namespaces and opted-out pods (the
    chart's own pods carry the opt-out label); this checks again, and skips the chart's pods
    by their labels too, so that a hand-edited configuration or pod cannot make us touch them.
    """
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    labels = meta.get("labels") or {}
    if namespace in excluded_namespaces or IGNORE_LABEL in labels or is_own_pod(labels):
        return None
    match = matching.governing_policy(
        view.policies(), "placement", labels, view.namespaces.get(namespace, {})
    )
    if match.policy is None:
        return None
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return hints.decide(
        match.policy,
        pod,
        owner_kind=owner.get("kind") if owner else None,
        instance_types=view.instance_types(),
    )
