"""The chart's webhook configuration, pointed at a `schedpolicy webhook` on loopback."""

from __future__ import annotations

import base64
from pathlib import Path

from localcluster import LocalCluster, chart
from localcluster.controlplane import free_port
from localcluster.operator_process import OperatorProcess
from localcluster.pki import Authority


class LoopbackWebhook:
    """A serving certificate for 127.0.0.1 and the chart's MutatingWebhookConfiguration,
    changed only in where it sends requests (and, if asked, in which namespaces)."""

    def __init__(self, cluster: LocalCluster, workdir: Path, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.port = free_port()
        ca = Authority(workdir)
        pair = ca.issue("webhook", common_name="schedpolicy-webhook", hosts=("127.0.0.1",))
        self.ca, self.cert, self.key = ca.cert_path, pair.cert, pair.key

    def webhook_args(self) -> list[str]:
        return [
            f"--port={self.port}",
            "--address=127.0.0.1",
            f"--cert={self.cert}",
            f"--key={self.key}",
        ]

    def start(self, log: Path, *extra: str) -> OperatorProcess:
        """`schedpolicy webhook` as the chart's webhook ServiceAccount, /metrics on a free
        loopback port; handed out once its view is synced."""
        proc = OperatorProcess(
            self.cluster.webhook_kubeconfig,
            log,
            f"--metrics-port={free_port()}",
            "--metrics-address=127.0.0.1",
            *self.webhook_args(),
            *extra,
            command="webhook",
        )
        proc.wait_for_log("webhook view synced")
        return proc

    def register(self, *, every_namespace: bool = False) -> None:
        docs = chart.render("templates/webhook/configuration.yaml")
        (config,) = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
        config["metadata"]["name"] = self.name
        for hook in config["webhooks"]:
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{self.port}/hints",
                "caBundle": base64.b64encode(self.ca.read_bytes()).decode(),
            }
            if every_namespace:
                # Only to prove the operator's own check: the chart never does this.
                del hook["namespaceSelector"]
        self.cluster.kubectl("apply", "-f", "-", objects=[config])

    def unregister(self) -> None:
        self.cluster.kubectl(
            "delete", "mutatingwebhookconfiguration", self.name, "--ignore-not-found"
        )
