"""Karpenter's KWOK provider as a component: its CRDs, node class and NodePools, then the
process itself (karpenter.py checks and builds what it is given)."""

from __future__ import annotations

from typing import Any

from localcluster import binaries, karpenter
from localcluster.component import Process
from localcluster.kubeconfigs import Clients
from localcluster.ports import free_port
from localcluster.supervisor import Supervisor


class Karpenter(Process):
    """A running one is replaced (to change its feature gates, say). Everything is checked
    before anything is applied (`checked`: already, by `karpenter.manifests`)."""

    name = "karpenter"
    startup_timeout = 90

    def __init__(
        self,
        supervisor: Supervisor,
        clients: Clients,
        options: karpenter.KarpenterOptions,
        checked: tuple[karpenter.Catalog, list[dict[str, Any]]] | None = None,
    ) -> None:
        super().__init__(supervisor)
        self.clients = clients
        self.options = options
        self.checked = checked
        # Chosen by `start`.
        self.metrics = self.health = 0
        self._env: dict[str, str] = {}

    def start(self) -> None:
        catalog, objects = self.checked or karpenter.manifests(self.options)
        self.checked = catalog, objects
        self.stop()
        self._apply(objects)
        types_file = karpenter.write_instance_types(
            catalog, self.clients.workdir / "karpenter-instance-types.json"
        )
        self.metrics, self.health = free_port(), free_port()
        self._env = karpenter.environment(
            self.options, self.clients.path(self.name), types_file, self.metrics, self.health
        )
        super().start()

    @property
    def catalog(self) -> karpenter.Catalog:
        if self.checked is None:
            raise RuntimeError("the catalog is read when Karpenter starts")
        return self.checked[0]

    def _apply(self, objects: list[dict[str, Any]]) -> None:
        crds = sorted(karpenter.crd_dir().glob("*.yaml"))
        # Server-side: the CRDs are too big for client-side apply's last-applied annotation.
        self.clients.kubectl("apply", "--server-side", *(f"--filename={c}" for c in crds))
        self.clients.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            *(f"crd/{c.stem.split('_', 1)[1]}.{c.stem.split('_', 1)[0]}" for c in crds),
        )
        self.clients.kubectl("apply", "-f", "-", objects=objects)

    def argv(self) -> list[str]:
        return [str(binaries.path("karpenter"))]

    def env(self) -> dict[str, str]:
        return self._env

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health}/readyz"
