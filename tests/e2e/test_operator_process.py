"""`schedpolicy run` logs in through the kubeconfig, runs, stops cleanly on SIGTERM,
and leaves no kopf bookkeeping on any Pod or Node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess

pytestmark = pytest.mark.e2e


@pytest.fixture
def operator(cluster: LocalCluster, tmp_path: Path) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(cluster.kubeconfig, tmp_path / "operator.log", "--heartbeat-seconds=0.5")
    yield proc
    proc.stop()


def _kopf_marks(obj: client.V1ObjectMeta) -> list[str]:
    keys = list((obj.annotations or {}).keys()) + list(obj.finalizers or [])
    return [k for k in keys if "kopf" in k]


async def test_operator_runs_and_stops_cleanly(
    operator: OperatorProcess, api: client.ApiClient
) -> None:
    operator.wait_for_log("Activity 'login' succeeded")
    operator.wait_for_log("heartbeat 2:")

    assert operator.stop() == 0, operator.output()[-3000:]
    assert "Traceback" not in operator.output()

    core = client.CoreV1Api(api)
    marked = [
        (o.kind or "", o.metadata.name, _kopf_marks(o.metadata))
        for o in (await core.list_node()).items + (await core.list_pod_for_all_namespaces()).items
        if _kopf_marks(o.metadata)
    ]
    assert marked == []
