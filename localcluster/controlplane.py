"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (RBAC on),
kube-controller-manager, kube-scheduler and a KWOK controller for fake nodes.

Every component is the upstream binary built by `make tools`; nothing is mocked.
Each has a module of its own with the same start/ready/stop interface (component.py);
`LocalCluster` composes them, in order. kubeconfigs.py builds every kubeconfig and client.
State lives in a work directory: pki/, etcd/, logs/ (one log per process, plus
the apiserver audit log), pids/, kubeconfig and state.json.
"""

from __future__ import annotations

import json
import shutil
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from localcluster import (
    apiserver,
    binaries,
    chart,
    controller_manager,
    karpenter,
    kwok,
    operator_component,
    topology,
)
from localcluster.apiserver import AUDIT_POLICY, ApiServer, Forwarder
from localcluster.component import ClusterError, Component, http_ok, launch, wait_http
from localcluster.controller_manager import ControllerManager
from localcluster.etcd import Etcd
from localcluster.karpenter_process import Karpenter
from localcluster.kubeconfigs import Clients, kubectl_input
from localcluster.kwok import Kwok
from localcluster.node import RealNode
from localcluster.pki import Authority, service_account_keys
from localcluster.ports import Ports, free_port
from localcluster.scheduler import Scheduler, SecondaryScheduler
from localcluster.supervisor import Supervisor

__all__ = [
    "AUDIT_POLICY",
    "DEFAULT_WORKDIR",
    "STOP_ORDER",
    "ClusterError",
    "LocalCluster",
    "Ports",
    "kubectl_input",
]

DEFAULT_WORKDIR = binaries.REPO / ".cluster" / "local"
STOP_ORDER = [
    "schedpolicy-operator",
    "kube-proxy",
    "kubelet",
    "containerd",
    "karpenter",
    "kwok",
    "schedpolicy-scheduler",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "apiserver-forwarder",
    "etcd",
]


class LocalCluster:
    def __init__(self, workdir: Path = DEFAULT_WORKDIR) -> None:
        self.workdir = workdir.resolve()
        self.clients = Clients(self.workdir)
        self.pki = self.clients.pki
        self.kubeconfig = self.clients.admin
        self.operator_kubeconfig = self.clients.path(operator_component.CONTROLLER)
        self.webhook_kubeconfig = self.clients.path(operator_component.WEBHOOK)
        self.audit_log = self.workdir / apiserver.AUDIT_LOG
        self.state_file = self.workdir / "state.json"
        self.supervisor = Supervisor(self.workdir)
        self.node = RealNode(self.workdir, self.supervisor, self.clients)

    # ---- queries -------------------------------------------------------------------------

    @property
    def ports(self) -> Ports:
        return Ports(**json.loads(self.state_file.read_text())["ports"])

    @property
    def server(self) -> str:
        return self.ports.server

    def ssl_context(self) -> ssl.SSLContext:
        return self.clients.ssl_context()

    def healthy(self) -> bool:
        if not self.state_file.exists():
            return False
        if any(not r.alive() for r in self.supervisor.records()):
            return False
        return http_ok(f"{self.server}/readyz", self.ssl_context())

    def serves_admission_policies(self) -> bool:
        """Whether this apiserver serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
        (on by default from Kubernetes 1.36)."""
        return apiserver.serves_admission_policies(self)

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        objects: Iterable[Mapping[str, Any]] | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> str:
        """Run kubectl against this cluster; `objects` are sent as its `-f -` input."""
        return self.clients.kubectl(
            *args, input=input, objects=objects, check=check, timeout=timeout
        )

    def logs(self) -> list[Path]:
        return sorted((self.workdir / "logs").glob("*.log"))

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    def real_node(self) -> bool:
        return bool(
            self.state_file.exists() and json.loads(self.state_file.read_text()).get("real_node")
        )

    def up(
        self,
        nodes: Iterable[topology.FakeNode] | None = None,
        timeout: float = 120,
        *,
        real_node: bool = False,
        karpenter_options: karpenter.KarpenterOptions | None = None,
    ) -> None:
        """Start the control plane. With `real_node`, also a kubelet node (containerd,
        kube-proxy, CNI bridge) that runs the images `make image` built; the chart is then
        installed with helm instead of this harness running its parts as local processes.
        With `karpenter_options`, also Karpenter's KWOK provider and its NodePools."""
        lacking = binaries.missing()
        checked = None
        if karpenter_options is not None:
            # Refused before anything starts: nothing is written for bad input.
            checked = karpenter.manifests(karpenter_options)
        if lacking:
            raise ClusterError(
                f"missing binaries in {binaries.bin_dir()}: {', '.join(lacking)}; run `make tools`"
            )
        ports = self._fresh_workdir(real_node)
        try:
            self._prepare(ports, real_node)
            for component in self._control_plane(ports, real_node):
                launch(component)
            controller_manager.wait_for_default_service_account(self, timeout)
            self.create_nodes(topology.load() if nodes is None else nodes)
            if karpenter_options is not None:
                self.start_karpenter(karpenter_options, checked)
            if real_node:
                launch(self.node)
                return
            self.kubectl("create", "namespace", chart.NAMESPACE)
            operator_component.write_identities(self.clients, ports.server)
            launch(SecondaryScheduler(self.supervisor, self.clients, ports))
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        if self.real_node or self.supervisor.get("containerd") is not None:
            self.node.stop()
        self.supervisor.stop_all(STOP_ORDER)

    def stop_component(self, name: str) -> None:
        """Stop one component; `start_component` brings it back with the same command line."""
        record = self.supervisor.get(name)
        if record is None:
            raise ClusterError(f"{name} is not running")
        (self.workdir / f"stopped-{name}.json").write_text(json.dumps(list(record.argv)))
        self.supervisor.stop(name)

    def start_component(self, name: str, timeout: float = 90) -> None:
        saved = self.workdir / f"stopped-{name}.json"
        self.supervisor.start(name, json.loads(saved.read_text()))
        saved.unlink()
        if name == ApiServer.name:
            self._wait_apiserver(name, self.server, timeout)

    def restart_component(self, name: str, timeout: float = 60) -> None:
        """Stop one component and start it again with the same command line."""
        record = self.supervisor.get(name)
        if record is None:
            raise ClusterError(f"{name} is not running")
        self.supervisor.stop(name)
        self.supervisor.start(name, list(record.argv))
        if name == ApiServer.name:
            self._wait_apiserver(name, self.server, timeout)

    def start_extra_apiserver(self, name: str, extra_args: list[str], timeout: float = 90) -> str:
        """A second kube-apiserver on the same etcd (as in an HA control plane), with its own
        port, no audit log and `extra_args` (feature gates, say). Returns its URL; stop it
        with `supervisor.stop(name)`, and `down()` stops it too."""
        record = self.supervisor.get(ApiServer.name)
        if record is None:
            raise ClusterError("kube-apiserver is not running")
        port = free_port()
        self.supervisor.start(name, apiserver.replica_argv(record.argv, port, extra_args))
        server = f"https://127.0.0.1:{port}"
        self._wait_apiserver(name, server, timeout)
        return server

    # ---- nodes ---------------------------------------------------------------------------

    def create_nodes(self, nodes: Iterable[topology.FakeNode], timeout: float = 60) -> None:
        kwok.create_nodes(self.clients, nodes, timeout)

    # ---- Karpenter and the operator ------------------------------------------------------

    def start_karpenter(
        self,
        options: karpenter.KarpenterOptions,
        checked: tuple[karpenter.Catalog, list[dict[str, Any]]] | None = None,
    ) -> karpenter.Catalog:
        """Karpenter's CRDs, node class and NodePools, then Karpenter itself; a running one is
        replaced (to change its feature gates, say). Everything is checked before anything
        is applied (`checked`: already, by `karpenter.manifests`)."""
        component = Karpenter(self.supervisor, self.clients, options, checked)
        launch(component)
        state = json.loads(self.state_file.read_text())
        state["karpenter"] = {"metrics": component.metrics, "health": component.health}
        self.state_file.write_text(json.dumps(state, indent=2))
        return component.catalog

    def start_operator(self, *extra: str) -> None:
        """The controller and the webhook from this checkout as supervised components
        (stopped by `down`), the webhook on loopback behind the chart's configuration."""
        launch(operator_component.Operator(self, self.supervisor, *extra))

    def apply_operator_rbac(self) -> list[dict[str, Any]]:
        """The chart's controller and webhook RBAC and the controller's admission guard,
        applied as `helm template | kubectl apply` would."""
        return operator_component.apply_rbac(self)

    def remove_operator_singleton(self) -> None:
        """Deletes the cluster-scoped RBAC `apply_operator_rbac` made, so that a real `helm
        install` can hold the product's fixed names (the chart refuses a second holder)."""
        operator_component.remove_singleton(self)

    def service_account_kubeconfig(
        self, account: str, file_stem: str, namespace: str = chart.NAMESPACE
    ) -> Path:
        """A kubeconfig that authenticates with a token of this ServiceAccount."""
        return self.clients.service_account(self.server, account, file_stem, namespace)

    # ---- composition ---------------------------------------------------------------------

    def _fresh_workdir(self, real_node: bool) -> Ports:
        """Whatever ran here stopped and its work directory emptied; new ports recorded."""
        self.down()
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        self.supervisor = Supervisor(self.workdir)
        self.node = RealNode(self.workdir, self.supervisor, self.clients)
        ports = Ports.allocate()
        state = {"ports": asdict(ports), "real_node": real_node}
        self.state_file.write_text(json.dumps(state, indent=2))
        return ports

    def _prepare(self, ports: Ports, real_node: bool) -> None:
        """Certificates, kubeconfigs and the audit policy, before any process starts."""
        ca = Authority(self.pki)
        apiserver.issue_serving_cert(ca)
        if real_node:
            self.node.prepare(ca, ports.server)
        self.clients.write_identities(ca, ports.server)
        service_account_keys(self.pki)
        apiserver.write_audit_policy(self.workdir)

    def _control_plane(self, ports: Ports, real_node: bool) -> list[Component]:
        """In the order they start, each once the ones before it are ready."""
        supervisor, clients = self.supervisor, self.clients
        node_args = self.node.apiserver_args() if real_node else None
        forwarder: list[Component] = [Forwarder(supervisor, ports.apiserver)] if real_node else []
        return [
            Etcd(supervisor, self.workdir, ports),
            ApiServer(supervisor, clients, ports, node_args),
            *forwarder,
            ControllerManager(supervisor, clients, ports, real_node=real_node),
            Scheduler(supervisor, clients, ports),
            Kwok(supervisor, clients, ports),
        ]

    def _wait_apiserver(self, name: str, server: str, timeout: float) -> None:
        wait_http(self.supervisor, f"{server}/readyz", self.ssl_context(), name, timeout)
