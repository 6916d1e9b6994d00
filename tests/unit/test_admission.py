"""Which pods the webhook may hint at all."""

from __future__ import annotations

from typing import Any

import pytest

from schedpolicy import decisions
from schedpolicy.admission import hints_for

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
    view = decisions.build_view(
        policies=[POLICY],
        namespaces=[{"metadata": {"name": n}} for n in ("apps", "kube-system")],
    )
    assert (hints_for(body, view, ("kube-system",)) is not None) is hinted
