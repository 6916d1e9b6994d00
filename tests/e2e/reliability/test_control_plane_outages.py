"""The control plane failing under the operator, judged from what the apiserver stored, never
from the operator's logs: an apiserver restart in the middle of a reconcile, and a watch that
expires behind an etcd compaction."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from tests.e2e.kubeobjects import ready_pods, wait_until
from tests.e2e.pools import Pool, get_json
from tests.e2e.reliability.conftest import (
    Start,
    app_on_fleet,
    converged,
    cost_policy,
    cost_writes,
    costs_written,
    restart_stopped_components,
)


def assert_every_write_hit_its_own_pod(
    cluster: LocalCluster, namespace: str, since: datetime
) -> None:
    uids = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in get_json(cluster, "pods", "-n", namespace)["items"]
    }
    for event in cost_writes(cluster, namespace, since):
        if event.code != 200 or not isinstance(event.request, list):
            continue
        guard = [op for op in event.request if op.get("path") == "/metadata/uid"]
        assert guard, f"an unguarded patch to {event.name}"
        assert guard[0]["value"] == uids.get(event.name, guard[0]["value"]), (
            f"{event.name} got a cost for another pod"
        )


async def test_apiserver_restart_mid_reconcile(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    """The apiserver stops for 5 s while the operator writes costs for 500 pods: once it is
    back, every cost is the one the policy gives, written by the same process, and every
    write went to the pod it was meant for."""
    await app_on_fleet(api, namespace, pool, 10, "60", 500)
    started = datetime.now(UTC)
    cost_policy(cluster, policies, f"restart-{namespace}", namespace)
    operator = start_operator("--write-concurrency=4")
    await asyncio.to_thread(
        wait_until,
        lambda: costs_written(cluster, namespace) >= 50,
        within=60,
        what="the first costs",
    )

    cluster.stop_component("kube-apiserver")
    await asyncio.sleep(5)
    cluster.start_component("kube-apiserver")

    await asyncio.to_thread(
        wait_until,
        lambda: converged(cluster, namespace),
        within=180,
        what="every cost equal to the pure function's, after the restart",
    )
    assert operator.proc.poll() is None, "the operator had to be restarted"
    assert_every_write_hit_its_own_pod(cluster, namespace, started)


def etcd_compact(cluster: LocalCluster) -> int:
    """Compact etcd up to its current revision, through etcd's own HTTP gateway."""
    url = f"http://127.0.0.1:{cluster.ports.etcd_client}/v3"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(f"{url}/{path}", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.load(resp))

    revision = int(
        post("kv/range", {"key": base64.b64encode(b"/").decode(), "limit": 1})["header"]["revision"]
    )
    post("kv/compaction", {"revision": revision, "physical": True})
    return revision


async def test_watch_expiry_relists_and_stays_correct(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    start_operator: Start,
    policies: list[str],
) -> None:
    """Every watch cut after etcd compacted past the revisions it had seen: the operator
    gets 410 Gone, lists again, and the costs stay right for the pods that came since, with
    no restart."""
    apps = client.AppsV1Api(api)
    await app_on_fleet(api, namespace, pool, 3, "40", 6)
    cost_policy(cluster, policies, f"expiry-{namespace}", namespace)
    operator = start_operator("--verbose")
    await asyncio.to_thread(
        wait_until, lambda: converged(cluster, namespace), within=60, what="convergence"
    )

    # Let the watched resource versions fall behind a compaction, then cut every watch.
    await apps.patch_namespaced_deployment_scale("app", namespace, {"spec": {"replicas": 9}})
    await ready_pods(api, namespace, "app=app", 9)
    etcd_compact(cluster)
    cluster.stop_component("kube-apiserver")
    cluster.start_component("kube-apiserver")
    await asyncio.to_thread(
        wait_until,
        lambda: (
            "pods: resourceVersion" in operator.output()
            and "expired; relisting" in operator.output()
        ),
        within=60,
        what="the 410 Gone and the relist",
    )
    await apps.patch_namespaced_deployment_scale("app", namespace, {"spec": {"replicas": 12}})
    await ready_pods(api, namespace, "app=app", 12)
    await asyncio.to_thread(
        wait_until, lambda: converged(cluster, namespace), within=90, what="convergence"
    )
    assert operator.proc.poll() is None


@pytest.fixture(autouse=True)
def _keep_the_control_plane_whole(cluster: LocalCluster) -> Iterator[None]:
    """Whatever a fault test does to the components, the next test finds all of them up."""
    yield
    restart_stopped_components(cluster)
