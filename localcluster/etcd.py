"""etcd, the control plane's store: one member on loopback, its data in `<workdir>/etcd`."""

from __future__ import annotations

from pathlib import Path

from localcluster import binaries
from localcluster.component import Process
from localcluster.ports import Ports
from localcluster.supervisor import Supervisor


class Etcd(Process):
    name = "etcd"
    startup_timeout = 30

    def __init__(self, supervisor: Supervisor, workdir: Path, ports: Ports) -> None:
        super().__init__(supervisor)
        self.data_dir = workdir / "etcd"
        self.client = f"http://127.0.0.1:{ports.etcd_client}"
        self.peer = f"http://127.0.0.1:{ports.etcd_peer}"

    def argv(self) -> list[str]:
        return [
            str(binaries.path("etcd")),
            "--name=local",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={self.client}",
            f"--advertise-client-urls={self.client}",
            f"--listen-peer-urls={self.peer}",
            f"--initial-advertise-peer-urls={self.peer}",
            f"--initial-cluster=local={self.peer}",
            # A throwaway test store: durability across power loss buys nothing here.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def health_url(self) -> str:
        return f"{self.client}/health"
