"""KWOK: it fakes the nodes of the topology (only those annotated as fake, so that a real
node is left to its kubelet) and makes their pods Running and Ready, by the stages in
`stages/`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from localcluster import binaries, topology
from localcluster.component import ClusterError, Process, has_ready_condition
from localcluster.kubeconfigs import Clients
from localcluster.ports import Ports
from localcluster.supervisor import Supervisor

STAGES_DIR = Path(__file__).with_name("stages")
POD_CIDR = "127.66.0.0/16"


class Kwok(Process):
    name = "kwok"
    startup_timeout = 60

    def __init__(self, supervisor: Supervisor, clients: Clients, ports: Ports) -> None:
        super().__init__(supervisor)
        self.kubeconfig = clients.path("kwok")
        self.port = ports.kwok

    def argv(self) -> list[str]:
        stages = sorted(STAGES_DIR.glob("*.yaml"))
        return [
            str(binaries.path("kwok")),
            f"--kubeconfig={self.kubeconfig}",
            *(f"--config={s}" for s in stages),
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={topology.FAKE_NODE_ANNOTATION}=fake",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.0.0.1",
            f"--server-address=127.0.0.1:{self.port}",
            "--node-lease-duration-seconds=40",
        ]

    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/healthz"


def create_nodes(clients: Clients, nodes: Iterable[topology.FakeNode], timeout: float) -> None:
    """The fake nodes, returned once KWOK has them all Ready and untainted."""
    manifests = [n.manifest() for n in nodes]
    if not manifests:
        return
    # Thousands of nodes (the large benchmark) take minutes to create and to list.
    clients.kubectl("create", "-f", "-", objects=manifests, timeout=max(120, timeout))
    names = {m["metadata"]["name"] for m in manifests}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = clients.kubectl("get", "nodes", "-o", "json", timeout=max(120, timeout))
        items = json.loads(listed)["items"]
        schedulable = {n["metadata"]["name"] for n in items if _schedulable(n)}
        if names <= schedulable:
            return
        time.sleep(0.5)
    raise ClusterError(
        f"fake nodes did not become Ready and untainted within {timeout}s;"
        f" see {clients.workdir}/logs/kwok.log"
    )


def _schedulable(node: dict[str, Any]) -> bool:
    ready = has_ready_condition(node)
    tainted = any(
        t["key"] == "node.kubernetes.io/not-ready" for t in node["spec"].get("taints", [])
    )
    return ready and not tainted
