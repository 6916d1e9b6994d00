"""The chart's webhook configuration, pointed at an operator serving on loopback."""

from __future__ import annotations

import base64
from pathlib import Path

from localcluster import LocalCluster, chart
from localcluster.controlplane import free_port
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

    def operator_args(self) -> list[str]:
        return [
            f"--webhook-port={self.port}",
            "--webhook-address=127.0.0.1",
            f"--webhook-cert={self.cert}",
            f"--webhook-key={self.key}",
        ]

    def register(self, *, every_namespace: bool = False) -> None:
        docs = chart.render("templates/webhook.yaml")
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
