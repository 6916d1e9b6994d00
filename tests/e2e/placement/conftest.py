"""Placement: the admission webhook's hints and the chart's secondary scheduler, both real.

The operator serves the webhook on loopback with a certificate made for this
package; the MutatingWebhookConfiguration is the chart's, rendered by helm, with
only its clientConfig pointed at that loopback URL. The two processes start once per
admission path for the whole package.

Every case runs on both admission paths: `webhook`, and `policy`, where the controller
compiles each policy to a MutatingAdmissionPolicy and narrows the webhook's match
condition, so that the same assertions hold for hints made inside the apiserver. On the
policy path each case also checks, pod by pod, that the apiserver stored exactly what the
webhook's `admission.review` makes of the same body (the `create_pod` fixture).
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess, running
from localcluster.webhook import LoopbackWebhook
from tests.e2e import admission_diff as diff
from tests.e2e.kubeobjects import PAUSE_IMAGE, eventually, wait_until
from tests.e2e.pools import Pool, get_json

SCHEDULER = "schedpolicy-scheduler"
HINTS = "schedpolicy.io/hints"
# The chart's own name: RBAC and the admission guard let the controller narrow only that one.
WEBHOOK_CONFIGURATION = "schedpolicy"


@pytest.fixture(scope="package", params=["webhook", "policy"])
def mode(request: pytest.FixtureRequest, cluster: LocalCluster) -> str:
    """The admission path under test: the webhook, or the compiled policies."""
    if request.param == "policy" and not cluster.serves_admission_policies():
        pytest.skip("this apiserver does not serve admissionregistration.k8s.io/v1 MAPs")
    return str(request.param)


@pytest.fixture(scope="package")
def processes(
    cluster: LocalCluster, crd: str, tmp_path_factory: pytest.TempPathFactory, mode: str
) -> Iterator[tuple[OperatorProcess, OperatorProcess]]:
    """The controller, and `schedpolicy webhook` on loopback behind the chart's webhook
    configuration: the two processes the chart runs."""
    webhook = LoopbackWebhook(
        cluster, tmp_path_factory.mktemp("webhook-pki"), WEBHOOK_CONFIGURATION
    )
    admission = [f"--admission-mode={mode}", f"--webhook-configuration={WEBHOOK_CONFIGURATION}"]
    with running(cluster, "--verbose", "--pending-threshold-seconds=5", *admission) as proc:
        hook = webhook.start(cluster.workdir / "logs" / "schedpolicy-webhook-e2e.log", "--verbose")
        webhook.register()
        try:
            yield proc, hook
        finally:
            webhook.unregister()
            hook.stop()


@pytest.fixture(scope="package")
def operator(processes: tuple[OperatorProcess, OperatorProcess]) -> OperatorProcess:
    """The controller of `processes`, in place of the suite's own operator."""
    return processes[0]


@pytest.fixture(scope="package")
def webhook_process(processes: tuple[OperatorProcess, OperatorProcess]) -> OperatorProcess:
    """The webhook of `processes`."""
    return processes[1]


CreatePod = Callable[[str, dict[str, Any]], Awaitable[client.V1Pod]]


class _Body:
    """What ApiClient.deserialize reads a response from."""

    def __init__(self, data: str) -> None:
        self.data = data


@pytest.fixture
async def create_pod(
    cluster: LocalCluster, api: client.ApiClient, mode: str
) -> AsyncIterator[CreatePod]:
    """`create(namespace, body)` creates the pod and returns it as the apiserver stored it.
    On the policy path it also checks that the stored pod equals the webhook path's answer
    for the same body (tests/e2e/admission_diff.py), byte for byte but for the token
    volume's random name. On the webhook path the two are one by construction."""
    core = client.CoreV1Api(api)
    plain = f"plain-{uuid.uuid4().hex[:8]}"
    if mode == "policy":
        await core.create_namespace({"metadata": {"name": plain}})

        def has_default_account() -> bool:
            listed = cluster.kubectl("get", "serviceaccounts", "-n", plain, "-o", "name")
            return "default" in listed

        await asyncio.to_thread(wait_until, has_default_account, within=30, what="an account")

    async def create(namespace: str, body: dict[str, Any]) -> client.V1Pod:
        sent = copy.deepcopy(body)
        raw: Any = await core.create_namespaced_pod(namespace, body, _preload_content=False)
        text = await raw.read()
        if mode == "policy":
            actual = diff.as_created(json.loads(text))
            inputs = await asyncio.to_thread(diff.cluster_inputs, cluster, namespace)
            lanes = diff.Lanes(api, plain, dict(inputs.namespaces), inputs)
            expected = diff.as_created(await lanes.webhook_path(sent, namespace))
            name = body["metadata"]["name"]
            assert actual == expected, f"{name}: stored {actual}; the webhook makes {expected}"
        pod: client.V1Pod = api.deserialize(_Body(text.decode()), "V1Pod")
        return pod

    try:
        yield create
    finally:
        if mode == "policy":
            await core.delete_namespace(plain)


def gpu_pod(name: str, pool: Pool, gpus: str = "1", **spec: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus} if gpus != "0" else {}
    labels = spec.pop("labels", {"app": "gpu"})
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": pool.selector,
            "containers": [
                {
                    "name": "c",
                    "image": PAUSE_IMAGE,
                    "resources": {"limits": limits, "requests": {"cpu": "500m"}},
                }
            ],
            **spec,
        },
    }


async def bound(
    api: client.ApiClient, namespace: str, selector: str, count: int
) -> list[client.V1Pod]:
    core = client.CoreV1Api(api)

    async def probe() -> list[client.V1Pod] | None:
        pods = (await core.list_namespaced_pod(namespace, label_selector=selector)).items
        done = [p for p in pods if p.spec.node_name]
        return done if len(done) == count else None

    return await eventually(probe, what=f"{count} pods ({selector}) to be bound")


async def compiled(cluster: LocalCluster, name: str) -> dict[str, Any]:
    """Wait until a MutatingAdmissionPolicy serves this policy, and the webhook is no longer
    called for its pods (the controller narrows it a few seconds after the write)."""

    def done() -> dict[str, Any] | None:
        status = get_json(cluster, "spol", name).get("status", {})
        found = {c["type"]: c for c in status.get("conditions", [])}.get("Compiled", {})
        return status if found.get("status") == "True" else None

    status = await asyncio.to_thread(wait_until, done, within=30, what=f"{name} compiled")
    await asyncio.sleep(5)  # past the controller's settle time; the webhook is narrowed
    return status


async def settled(cluster: LocalCluster, name: str, mode: str) -> None:
    """Until the path under test serves a policy just applied: the webhook reads it from
    its watch; a MutatingAdmissionPolicy is written, loaded, and the webhook narrowed."""
    if mode == "policy":
        await compiled(cluster, name)
    else:
        await asyncio.sleep(1)
