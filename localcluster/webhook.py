"""The chart's webhook configuration, pointed at a `schedpolicy webhook` on loopback."""

from __future__ import annotations

import base64
from pathlib import Path

from localcluster import chart
from localcluster.operator_process import (
    SCHEDPOLICY,
    Cluster,
    OperatorProcess,
    metrics_flags,
    schedpolicy_argv,
)
from localcluster.pki import Authority
from localcluster.ports import free_port


class LoopbackWebhook:
    """A serving certificate for 127.0.0.1 and the chart's MutatingWebhookConfiguration,
    changed only in where it sends requests (and, if asked, in which namespaces)."""

    def __init__(self, cluster: Cluster, workdir: Path, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.port = free_port()
        ca = Authority(workdir)
        pair = ca.issue("webhook", common_name="schedpolicy-webhook", hosts=("127.0.0.1",))
        self.ca, self.cert, self.key = ca.cert_path, pair.cert, pair.key

    def argv(
        self, *extra: str, tls: bool = True, metrics: bool = True, module: str = SCHEDPOLICY
    ) -> list[str]:
        """`schedpolicy webhook` as the chart's webhook ServiceAccount on this loopback port,
        serving this certificate (plain HTTP unless `tls`), /metrics on a free loopback
        port (unless not `metrics`)."""
        serving = [f"--port={self.port}", "--address=127.0.0.1"]
        if tls:
            serving += [f"--cert={self.cert}", f"--key={self.key}"]
        return schedpolicy_argv(
            "webhook",
            self.cluster.webhook_kubeconfig,
            *metrics_flags(metrics),
            *serving,
            *extra,
            module=module,
        )

    def start(
        self,
        log: Path,
        *extra: str,
        tls: bool = True,
        metrics: bool = True,
        module: str = SCHEDPOLICY,
        env: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> OperatorProcess:
        """The process of `argv`, handed out once its view is synced (stopped if it
        never is)."""
        proc = OperatorProcess.of(
            self.argv(*extra, tls=tls, metrics=metrics, module=module), log, env
        )
        try:
            proc.wait_for_log("webhook view synced", timeout)
        except BaseException:
            proc.stop()
            raise
        return proc

    def register(self, *, every_namespace: bool = False, port: int | None = None) -> None:
        """Applies the configuration, its requests sent to this webhook's port (or to
        `port`: another server on loopback with this certificate)."""
        docs = chart.rendered("templates/webhook/configuration.yaml")
        (config,) = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
        config["metadata"]["name"] = self.name
        for hook in config["webhooks"]:
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port or self.port}/hints",
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
