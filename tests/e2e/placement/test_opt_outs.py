"""Pods that are not ours to hint: a pod that names its own scheduler, and the product's own
operator and scheduler pods, wherever a release runs."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster, chart
from localcluster.operator_process import OperatorProcess
from tests.e2e.kubeobjects import PAUSE_IMAGE
from tests.e2e.placement.conftest import HINTS, SCHEDULER, CreatePod, settled
from tests.e2e.pools import apply_namespace_policy

pytestmark = pytest.mark.e2e


async def test_explicit_scheduler_is_left_alone(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """A pod that names its own scheduler is left as it is: the same scheduler, no affinity,
    no hints annotation."""
    apply_namespace_policy(
        cluster, policies, f"other-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    await settled(cluster, policies[-1], mode)
    body = {
        "metadata": {"name": "mine", "labels": {"app": "x"}},
        "spec": {"schedulerName": "other", "containers": [{"name": "c", "image": PAUSE_IMAGE}]},
    }
    created = await create_pod(namespace, body)

    assert created.spec.scheduler_name == "other"
    assert created.spec.affinity is None
    assert HINTS not in (created.metadata.annotations or {})


async def test_the_products_own_pods_are_never_hinted(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """Wherever a release runs, its operator and scheduler pods keep the default scheduler:
    the chart's webhook configuration skips them by their labels, and so does the operator."""
    apply_namespace_policy(
        cluster, policies, f"all-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    await settled(cluster, policies[-1], mode)
    rendered = chart.render(
        "templates/operator/deployment.yaml", "templates/scheduler/deployment.yaml"
    )
    templates = {
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"][
            "template"
        ]["metadata"]["labels"]
        for d in rendered
        if d["kind"] == "Deployment"
    }
    assert set(templates) == {"operator", "scheduler"}
    stripped = {k: v for k, v in templates["scheduler"].items() if k != "schedpolicy.io/ignore"}
    bodies = {
        "user": {"app": "user"},
        "operator": templates["operator"],
        "scheduler": templates["scheduler"],
        "scheduler-without-opt-out": stripped,
    }
    created = {}
    for name, labels in bodies.items():
        body = {
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": PAUSE_IMAGE}]},
        }
        created[name] = await create_pod(namespace, body)

    assert created["user"].spec.scheduler_name == SCHEDULER  # the webhook was there
    for name in ("operator", "scheduler", "scheduler-without-opt-out"):
        pod = created[name]
        assert pod.spec.scheduler_name == "default-scheduler", name
        assert pod.spec.affinity is None, name
        assert HINTS not in (pod.metadata.annotations or {}), name
