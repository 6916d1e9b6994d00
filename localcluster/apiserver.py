"""kube-apiserver on loopback, RBAC on, with an audit log of every write; and, with a real
node, the forwarder that lets that node's pods reach it."""

from __future__ import annotations

import ssl
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries, hostnet
from localcluster.component import Kubectl, Process
from localcluster.kubeconfigs import Clients
from localcluster.pki import Authority
from localcluster.ports import Ports
from localcluster.supervisor import Supervisor

SERVICE_CIDR = "10.96.0.0/16"
# Relative to the work directory.
AUDIT_LOG = Path("logs") / "audit.log"
AUDIT_POLICY_FILE = "audit-policy.yaml"

# Writes are logged (with the request body for pod and node patches, so tests can
# see exactly what was sent); reads and the fake nodes' lease renewals are not.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "None", "namespaces": ["kube-node-lease"]},
        {"level": "None", "users": ["system:apiserver"]},
        {
            "level": "Request",
            "verbs": ["patch", "update"],
            "resources": [{"group": "", "resources": ["pods", "nodes"]}],
        },
        {"level": "Metadata"},
    ],
}


def issue_serving_cert(ca: Authority) -> None:
    hosts = (
        "127.0.0.1",
        "localhost",
        "10.96.0.1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        # The address pods reach the apiserver at, through the forwarder.
        hostnet.GATEWAY,
    )
    ca.issue("apiserver", common_name="kube-apiserver", hosts=hosts)


def write_audit_policy(workdir: Path) -> None:
    (workdir / AUDIT_POLICY_FILE).write_text(yaml.safe_dump(AUDIT_POLICY))


class ApiServer(Process):
    """`node_args`: the real node's flags (how to reach its kubelet), or None without one."""

    name = "kube-apiserver"
    startup_timeout = 90

    def __init__(
        self,
        supervisor: Supervisor,
        clients: Clients,
        ports: Ports,
        node_args: Sequence[str] | None,
    ) -> None:
        super().__init__(supervisor)
        self.clients = clients
        self.ports = ports
        self.node_args = node_args

    def argv(self) -> list[str]:
        pki, workdir, p = self.clients.pki, self.clients.workdir, self.ports
        return [
            str(binaries.path("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{p.etcd_client}",
            "--bind-address=127.0.0.1",
            f"--secure-port={p.apiserver}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            # Published to kube-system/extension-apiserver-authentication, which the
            # controller-manager and scheduler read for delegated authentication.
            f"--requestheader-client-ca-file={pki / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            f"--audit-policy-file={workdir / AUDIT_POLICY_FILE}",
            f"--audit-log-path={workdir / AUDIT_LOG}",
            "--audit-log-format=json",
            "--audit-log-maxsize=500",
            "--audit-log-maxbackup=2",
            "--max-requests-inflight=800",
            "--max-mutating-requests-inflight=400",
            *self._node_args(),
        ]

    def _node_args(self) -> list[str]:
        """Pods reach the apiserver at the bridge's address, through the forwarder: the
        `kubernetes` Service's endpoint is that address. Webhooks are called at their pods'
        endpoints rather than through kube-proxy."""
        if self.node_args is None:
            # A loopback address cannot back the `kubernetes` Service's endpoints.
            return ["--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none"]
        return [
            f"--advertise-address={hostnet.GATEWAY}",
            "--endpoint-reconciler-type=lease",
            "--enable-aggregator-routing=true",
            *self.node_args,
        ]

    def health_url(self) -> str:
        return f"{self.ports.server}/readyz"

    def health_context(self) -> ssl.SSLContext:
        return self.clients.ssl_context()


def replica_argv(argv: Sequence[str], port: int, extra_args: Sequence[str]) -> list[str]:
    """A running apiserver's command line for a second one on the same etcd: its own port,
    no audit log, and `extra_args`."""
    kept = [a for a in argv if not a.startswith(("--secure-port=", "--audit-"))]
    return [*kept, f"--secure-port={port}", *extra_args]


def serves_admission_policies(cluster: Kubectl) -> bool:
    """Whether this apiserver serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
    (on by default from Kubernetes 1.36)."""
    resources = cluster.kubectl("api-resources", "--api-group=admissionregistration.k8s.io")
    return any(
        line.split()[0] == "mutatingadmissionpolicies" and "/v1 " in f"{line} "
        for line in resources.splitlines()[1:]
        if line.split()
    )


class Forwarder:
    """The bridge's address, forwarded to the apiserver's loopback port (see forwarder.py).
    Nothing to wait for: the apiserver behind it is ready already."""

    name = "apiserver-forwarder"
    startup_timeout = 0

    def __init__(self, supervisor: Supervisor, port: int) -> None:
        self.supervisor = supervisor
        self.port = port

    def start(self) -> None:
        self.supervisor.start(
            self.name,
            [
                sys.executable,
                "-m",
                "localcluster.forwarder",
                hostnet.GATEWAY,
                str(self.port),
                str(self.port),
            ],
        )

    def ready(self, timeout: float) -> None:
        pass

    def stop(self) -> None:
        self.supervisor.stop(self.name)
