"""`schedpolicy run` logs in through the kubeconfig, runs, stops cleanly on SIGTERM,
and leaves no kopf bookkeeping on any Pod or Node."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.ports import free_port
from localcluster.webhook import LoopbackWebhook

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
    """`schedpolicy run` logs in through the kubeconfig, runs, exits 0 on SIGTERM without a
    traceback, and leaves no kopf annotation or finalizer on any Pod or Node."""
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


def _probe(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_readiness_waits_for_the_view_and_liveness_does_not(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """/healthz answers 200 as soon as the process runs, while /readyz answers 503 until its
    view has synced (never, with no apiserver to reach), then 200 with the nodes it holds."""
    # An apiserver that is not there: the process is alive, but must not take webhook
    # traffic, because its view is empty.
    dead = tmp_path / "dead.kubeconfig"
    config = yaml.safe_load(cluster.operator_kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    dead.write_text(yaml.safe_dump(config))
    port = free_port()
    stranded = OperatorProcess(dead, tmp_path / "dead.log", f"--liveness-port={port}")
    try:
        stranded.wait_for_log("health on")
        assert _probe(port, "/healthz")[0] == 200
        code, body = _probe(port, "/readyz")
        assert (code, body["synced"]) == (503, False)
    finally:
        stranded.stop()

    port = free_port()
    proc = OperatorProcess(
        cluster.operator_kubeconfig, tmp_path / "live.log", f"--liveness-port={port}"
    )
    try:
        proc.wait_for_log("view synced")
        code, body = _probe(port, "/readyz")
        assert (code, body["synced"]) == (200, True)
        assert body["nodes"] > 0
    finally:
        proc.stop()


def test_a_renewed_webhook_certificate_restarts_the_process(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """When the webhook's certificate is renewed (new files in the mounted Secret), the
    webhook process says so and exits, to be started again with the new one."""
    # What cert-manager does on renewal: new files in the mounted Secret. kopf would keep
    # serving the old certificate, so the process must stop and be started again.
    webhook = LoopbackWebhook(cluster, tmp_path / "first", "renewal-probe")
    proc = webhook.start(tmp_path / "webhook.log")
    try:
        assert proc.proc.poll() is None
        renewed = LoopbackWebhook(cluster, tmp_path / "second", "renewal-probe")
        shutil.copyfile(renewed.key, webhook.key)
        shutil.copyfile(renewed.cert, webhook.cert)
        proc.wait_for_log("serving certificate changed", timeout=30)
        proc.proc.wait(timeout=30)
    finally:
        proc.stop()
