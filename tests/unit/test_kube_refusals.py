"""What an API refusal says: its class by status, and the apiserver's own message kept."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from schedpolicy.shell import kube, kube_errors

GUARD = "ValidatingAdmissionPolicy 'schedpolicy-controller-guard' denied request"


def _refusal(status: int, reason: str, body: str | None) -> ApiException:
    err = ApiException(status=status, reason=reason)
    err.body = body.encode() if body is not None else None
    return err


@pytest.mark.parametrize(
    ("status", "body", "kind", "text"),
    [
        (
            403,
            json.dumps({"kind": "Status", "message": GUARD}),
            kube_errors.Forbidden,
            f"403 Forbidden: {GUARD}",
        ),
        (403, None, kube_errors.Forbidden, "403 Forbidden"),
        (404, "404 page not found", kube_errors.Gone, "404 Forbidden"),
        (
            409,
            json.dumps({"message": "uid mismatch"}),
            kube_errors.PreconditionFailed,
            "409 Forbidden: uid mismatch",
        ),
        (503, json.dumps(["not", "a", "status"]), kube_errors.Transient, "503 Forbidden"),
        (400, json.dumps({"message": None}), kube_errors.Refused, "400 Forbidden"),
    ],
)
def test_a_refusal_keeps_the_apiservers_message(
    status: int, body: str | None, kind: type[kube_errors.KubeError], text: str
) -> None:
    with pytest.raises(kind) as raised, kube._typed_errors():
        raise _refusal(status, "Forbidden", body)
    assert str(raised.value) == text
