"""kube-controller-manager with the controllers the tests rely on; among them the deployment
and replicaset controllers, which honour deletion cost."""

from __future__ import annotations

import ssl
import time

from localcluster import binaries
from localcluster.component import ClusterError, Kubectl, Process, insecure
from localcluster.kubeconfigs import Clients
from localcluster.ports import Ports
from localcluster.supervisor import Supervisor

CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "pod-garbage-collector-controller",
    "disruption-controller",
    # Makes a pod's ResourceClaims from its ResourceClaimTemplates (DRA), and deletes them
    # with the pod.
    "resourceclaim-controller",
    # Removes the node.kubernetes.io/not-ready taint that every new node starts with,
    # once KWOK reports it Ready (and would taint it again if KWOK stopped renewing
    # its Lease, as for a dead kubelet).
    "node-lifecycle-controller",
)
# Only with a real node: Services need endpoints there (kube-proxy, and the apiserver's own
# routing to webhooks), and nowhere else would they do anything but watch every pod.
NODE_CONTROLLERS = ("endpoints-controller", "endpointslice-controller")


class ControllerManager(Process):
    name = "kube-controller-manager"
    startup_timeout = 60

    def __init__(
        self, supervisor: Supervisor, clients: Clients, ports: Ports, *, real_node: bool
    ) -> None:
        super().__init__(supervisor)
        self.clients = clients
        self.port = ports.controller_manager
        self.controllers = CONTROLLERS + (NODE_CONTROLLERS if real_node else ())

    def argv(self) -> list[str]:
        kubeconfig = self.clients.path(self.name)
        pki = self.clients.pki
        return [
            str(binaries.path("kube-controller-manager")),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            "--leader-elect=false",
            f"--controllers={','.join(self.controllers)}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            # Client-side throttling would make scale-downs of many replicas crawl.
            "--node-monitor-period=1s",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
        ]

    def health_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/healthz"

    def health_context(self) -> ssl.SSLContext:
        return insecure()


def wait_for_default_service_account(cluster: Kubectl, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.kubectl("get", "serviceaccount", "default", "-n", "default", check=False):
            return
        time.sleep(0.5)
    raise ClusterError("the serviceaccount controller never created default/default")
