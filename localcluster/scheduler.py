"""kube-scheduler twice: the cluster's default scheduler, and the chart's own secondary
scheduler, `schedpolicy-scheduler`, run from what the chart renders (see chart.py)."""

from __future__ import annotations

import ssl

import yaml

from localcluster import binaries, chart
from localcluster.component import Process, insecure
from localcluster.kubeconfigs import Clients
from localcluster.ports import Ports
from localcluster.supervisor import Supervisor


class Scheduler(Process):
    name = "kube-scheduler"
    startup_timeout = 60

    def __init__(self, supervisor: Supervisor, clients: Clients, ports: Ports) -> None:
        super().__init__(supervisor)
        self.kubeconfig = clients.path(self.name)
        self.port = ports.scheduler

    def argv(self) -> list[str]:
        return [
            str(binaries.path("kube-scheduler")),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            "--leader-elect=false",
        ]

    def health_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/healthz"

    def health_context(self) -> ssl.SSLContext:
        return insecure()


class SecondaryScheduler(Process):
    """The chart's scheduler: its RBAC, its ServiceAccount's token, its profile."""

    name = "schedpolicy-scheduler"
    startup_timeout = 60

    def __init__(self, supervisor: Supervisor, clients: Clients, ports: Ports) -> None:
        super().__init__(supervisor)
        self.clients = clients
        self.ports = ports
        self.config_path = clients.workdir / "schedpolicy-scheduler.yaml"
        self.kubeconfig = clients.path("schedpolicy-scheduler")

    def start(self) -> None:
        self._configure()
        super().start()

    def _configure(self) -> None:
        docs = chart.rendered("templates/scheduler/rbac.yaml", "templates/scheduler/configmap.yaml")
        rbac = [d for d in docs if d["kind"] != "ConfigMap"]
        self.clients.kubectl("apply", "-f", "-", objects=rbac)
        config = chart.scheduler_config(docs)
        account = config["profiles"][0]["schedulerName"]
        self.kubeconfig = self.clients.service_account(
            self.ports.server, account, "schedpolicy-scheduler"
        )
        # The one change to the chart's configuration: how to reach the apiserver.
        config["clientConnection"] = {"kubeconfig": str(self.kubeconfig)}
        self.config_path.write_text(yaml.safe_dump(config))

    def argv(self) -> list[str]:
        return [
            # A leader-elected kube-scheduler exits when it loses its Lease (say, while
            # the apiserver restarts) and relies on the kubelet to start it again.
            "/bin/sh",
            "-c",
            'while true; do "$0" "$@"; sleep 1; done',
            str(binaries.path("kube-scheduler")),
            f"--config={self.config_path}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            # kube-scheduler's own default; /metrics stays behind authorization, as in
            # the chart, so a scrape needs the chart's metrics-reader ClusterRole.
            "--authorization-always-allow-paths=/healthz,/readyz,/livez",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports.secondary_scheduler}",
        ]

    def health_url(self) -> str:
        return f"https://127.0.0.1:{self.ports.secondary_scheduler}/healthz"

    def health_context(self) -> ssl.SSLContext:
        return insecure()
