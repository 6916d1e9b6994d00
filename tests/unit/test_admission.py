"""Which pods the webhook may hint at all."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from schedpolicy.view import snapshot
from schedpolicy.view.placement.review import MalformedReview, hints_for, review

POLICY = {
    "apiVersion": "schedpolicy.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {"name": "everything", "uid": "p-1", "generation": 1},
    "spec": {"placement": {"avoidGPUNodes": True}},
}


def pod(namespace: str = "apps", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


@pytest.mark.parametrize(
    ("body", "hinted"),
    [
        (pod(app="web"), True),
        (pod(**{"schedpolicy.io/ignore": "true"}), False),
        (pod("kube-system"), False),
        # The chart's own pods, even with the opt-out label stripped.
        (
            pod(
                **{
                    "app.kubernetes.io/name": "schedpolicy",
                    "app.kubernetes.io/component": "scheduler",
                }
            ),
            False,
        ),
        (
            pod(
                **{
                    "app.kubernetes.io/name": "schedpolicy",
                    "app.kubernetes.io/component": "operator",
                }
            ),
            False,
        ),
        # Another product's operator, or a pod merely named like ours, is a user pod.
        (
            pod(**{"app.kubernetes.io/name": "other", "app.kubernetes.io/component": "operator"}),
            True,
        ),
        (pod(**{"app.kubernetes.io/name": "schedpolicy"}), True),
    ],
)
def test_who_may_be_hinted(body: dict[str, Any], hinted: bool) -> None:
    view = snapshot.build_view(
        policies=[POLICY],
        namespaces=[{"metadata": {"name": n}} for n in ("apps", "kube-system")],
    )
    assert (hints_for(body, view, ("kube-system",)) is not None) is hinted


# ---- the AdmissionReview, as the webhook process answers it ------------------------------


def admission_review(obj: dict[str, Any] | None, namespace: str = "apps") -> bytes:
    request: dict[str, Any] = {"uid": "req-1", "operation": "CREATE", "namespace": namespace}
    if obj is not None:
        request["object"] = obj
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


def answered(body: bytes) -> dict[str, Any]:
    view = snapshot.build_view(policies=[POLICY])
    answer = review(body, view, ("kube-system",))
    out: dict[str, Any] = json.loads(answer.body)
    out["result"] = answer.result
    return out


def test_a_review_answers_with_the_decisions_json_patch() -> None:
    submitted = pod(app="web")
    del submitted["metadata"]["namespace"]  # created through a namespaced URL
    out = answered(admission_review(submitted))
    response = out["response"]
    assert (out["kind"], out["apiVersion"]) == ("AdmissionReview", "admission.k8s.io/v1")
    assert (response["uid"], response["allowed"], response["patchType"]) == (
        "req-1",
        True,
        "JSONPatch",
    )
    patched = jsonpatch.apply_patch(submitted, json.loads(base64.b64decode(response["patch"])))
    expected = snapshot.build_view(policies=[POLICY])
    decision = hints_for({**pod(app="web")}, expected, ("kube-system",))
    assert decision is not None
    assert patched["spec"]["affinity"] == decision.changes["spec.affinity"]
    assert "schedpolicy.io/hints" in patched["metadata"]["annotations"]
    assert out["result"] == "hinted"


@pytest.mark.parametrize(
    "body",
    [
        admission_review(pod(**{"schedpolicy.io/ignore": "true"})),
        admission_review(pod("kube-system"), namespace="kube-system"),
        admission_review(None),
    ],
)
def test_a_review_without_hints_allows_the_pod_unchanged(body: bytes) -> None:
    out = answered(body)
    assert out["response"] == {"uid": "req-1", "allowed": True}
    assert out["result"] == "unchanged"


@pytest.mark.parametrize("body", [b"", b"{", b'{"request": {}}', b'{"request": {"uid": 3}}', b"[]"])
def test_a_malformed_review_is_refused_with_the_reason(body: bytes) -> None:
    view = snapshot.build_view(policies=[POLICY])
    with pytest.raises(MalformedReview):
        review(body, view, ())
