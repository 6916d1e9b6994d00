"""The JSON Patches that set and remove a pod's deletion cost, guarded so that they land on
the pod they were computed for or nowhere. Pure; shell/kube.py sends them."""

from __future__ import annotations

from typing import Any

from schedpolicy.core.wellknown import COST_ANNOTATION, KARPENTER_COST_ANNOTATION


def pointer(*parts: str) -> str:
    """A JSON Pointer (RFC 6901) from unescaped path segments."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def cost_patch(
    uid: str,
    value: str | None,
    *,
    has_annotations: bool,
    resource_version: str | None = None,
    karpenter: str | None = None,
) -> list[dict[str, Any]]:
    """Set the deletion cost (and Karpenter's disruption cost, when given), but only on the
    pod with this UID, in one patch: the two never disagree for a moment. Without a value,
    only Karpenter's disruption cost is set (the pod's deletion cost is Karpenter's gate's).

    The `test` makes the apiserver refuse the patch (422) if the name now belongs
    to a different pod, so a cost computed for one pod never lands on another.
    A JSON Patch `add` below /metadata/annotations fails when the map is absent,
    so then the whole map is added instead; that would replace any annotation
    added since we looked, so with a resourceVersion it also tests that the pod
    is still the version we saw (a 422 otherwise, and the watch brings the news).
    """
    values = {COST_ANNOTATION: value} if value is not None else {}
    if karpenter is not None:
        values[KARPENTER_COST_ANNOTATION] = karpenter
    guard = [{"op": "test", "path": "/metadata/uid", "value": uid}]
    if has_annotations:
        return [
            *guard,
            *(
                {"op": "add", "path": pointer("metadata", "annotations", key), "value": v}
                for key, v in values.items()
            ),
        ]
    if resource_version:
        guard.append({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})
    return [*guard, {"op": "add", "path": "/metadata/annotations", "value": values}]


def cost_removal_patch(
    uid: str, expected: str, karpenter: str | None = None
) -> list[dict[str, Any]]:
    """Remove our cost (and our disruption cost), only if the pod and the values are still
    the ones we know."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": uid}]
    for key, value in ((COST_ANNOTATION, expected), (KARPENTER_COST_ANNOTATION, karpenter)):
        if value is not None:
            path = pointer("metadata", "annotations", key)
            ops += [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}]
    return ops
