"""Which pod gets which hints at admission, and the AdmissionReview answered with them.

The glue between what the webhook knows (policies, namespace labels, instance types) and
hints.py. Pure: the webhook process (webhook.py) only times and counts `review`.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from schedpolicy.core.placement import hints
from schedpolicy.core.policy import matching
from schedpolicy.core.wellknown import (
    IGNORE_LABEL,
    PRODUCT_COMPONENTS,
    PRODUCT_NAME,
    controller_ref,
)

log = logging.getLogger("schedpolicy.admission")


class AdmissionInputs(Protocol):
    """What hints read of the cluster: the controller's ClusterView has it, and so has the
    webhook's much smaller view."""

    @property
    def namespaces(self) -> Mapping[str, Mapping[str, str]]: ...

    def policies(self) -> list[matching.Policy]: ...

    def instance_types(self) -> frozenset[str]: ...


def is_own_pod(labels: Mapping[str, str]) -> bool:
    key, name = PRODUCT_NAME
    return labels.get(key) == name and labels.get("app.kubernetes.io/component") in (
        PRODUCT_COMPONENTS
    )


def hints_for(
    pod: Mapping[str, Any], view: AdmissionInputs, excluded_namespaces: Collection[str]
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
    owner = controller_ref(meta)
    return hints.decide(
        match.policy,
        pod,
        owner_kind=owner.get("kind") if owner else None,
        instance_types=view.instance_types(),
    )


# ---- the AdmissionReview -----------------------------------------------------------------


class _Request(msgspec.Struct, gc=False):
    uid: str
    namespace: str = ""
    operation: str = ""
    # The pod as submitted, as plain JSON values: hints.decide reads it like the API's JSON.
    object: dict[str, Any] | None = None


class _Review(msgspec.Struct, gc=False):
    request: _Request
    api_version: str = msgspec.field(default="admission.k8s.io/v1", name="apiVersion")


_REVIEW = msgspec.json.Decoder(_Review)
_ENCODER = msgspec.json.Encoder()


class MalformedReview(ValueError):
    """The body is not an AdmissionReview with a request: nothing to answer."""


@dataclass(frozen=True)
class Answer:
    body: bytes  # the AdmissionReview response
    result: str  # hinted, unchanged, error
    decision: hints.HintDecision | None = None


def review(body: bytes, view: AdmissionInputs, excluded_namespaces: Collection[str]) -> Answer:
    """Answer one AdmissionReview: always allowed, with the hints' JSON Patch if any.

    An error while deciding allows the pod unchanged (as the webhook's failurePolicy
    Ignore would): a hint is never worth refusing a pod.
    """
    try:
        request = _REVIEW.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise MalformedReview(str(err)) from err
    req = request.request
    response: dict[str, Any] = {"uid": req.uid, "allowed": True}
    result, decision = "unchanged", None
    pod = req.object
    if req.operation in ("CREATE", "") and pod is not None:
        meta = pod.setdefault("metadata", {})
        if not meta.get("namespace") and req.namespace:
            # Pods created through a namespaced URL need not name their namespace.
            meta["namespace"] = req.namespace
        try:
            decision = hints_for(pod, view, excluded_namespaces)
        except Exception:
            log.exception(
                "cannot decide the hints for a pod in %s; admitting it unhinted", req.namespace
            )
            result = "error"
        if decision is not None:
            patch = _ENCODER.encode(decision.json_patch(pod))
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(patch).decode()
            result = "hinted"
    out = {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}
    return Answer(_ENCODER.encode(out), result, decision)
