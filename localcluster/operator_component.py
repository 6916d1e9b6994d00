"""The operator from this checkout as a component of the local cluster: the controller and
the webhook as supervised processes (stopped by `LocalCluster.down`), running as the chart's
ServiceAccounts with exactly the chart's RBAC, the webhook on loopback behind the chart's
configuration."""

from __future__ import annotations

from typing import Any

from localcluster import chart
from localcluster.component import Kubectl
from localcluster.kubeconfigs import Clients
from localcluster.operator_process import Cluster, controller_argv
from localcluster.supervisor import Supervisor
from localcluster.webhook import LoopbackWebhook

CONTROLLER = "schedpolicy-operator"
WEBHOOK = "schedpolicy-webhook"


class Operator:
    """Not waited for: the tests and the demo wait for what they need of it."""

    name = CONTROLLER
    startup_timeout = 0

    def __init__(self, cluster: Cluster, supervisor: Supervisor, *extra: str) -> None:
        self.cluster = cluster
        self.supervisor = supervisor
        self.extra = extra

    def start(self) -> None:
        webhook = LoopbackWebhook(
            self.cluster, self.cluster.workdir / "webhook-pki", "schedpolicy-local"
        )
        self.supervisor.start(CONTROLLER, controller_argv(self.cluster, *self.extra))
        self.supervisor.start(WEBHOOK, webhook.argv())
        webhook.register()

    def ready(self, timeout: float) -> None:
        pass

    def stop(self) -> None:
        self.supervisor.stop(CONTROLLER)
        self.supervisor.stop(WEBHOOK)


def apply_rbac(cluster: Kubectl) -> list[dict[str, Any]]:
    """The chart's controller and webhook RBAC and the controller's admission guard,
    applied as `helm template | kubectl apply` would."""
    rbac = chart.rendered(
        "templates/operator/rbac.yaml",
        "templates/webhook/rbac.yaml",
        "templates/operator/admission-guard.yaml",
    )
    cluster.kubectl("apply", "-f", "-", objects=rbac)
    return rbac


def write_identities(clients: Clients, server: str) -> None:
    """The controller and the webhook run as the chart's ServiceAccounts, with exactly
    the chart's RBAC."""
    rbac = apply_rbac(clients)
    for file_stem, component in ((CONTROLLER, "operator"), (WEBHOOK, "webhook")):
        (account,) = [
            d["metadata"]["name"]
            for d in rbac
            if d["kind"] == "ServiceAccount"
            and d["metadata"]["labels"]["app.kubernetes.io/component"] == component
        ]
        clients.service_account(server, account, file_stem)


def remove_singleton(cluster: Kubectl) -> None:
    """Deletes the cluster-scoped RBAC `apply_rbac` made, so that a real `helm install` can
    hold the product's fixed names (the chart refuses a second holder)."""
    for kind in ("clusterrolebinding", "clusterrole"):
        for name in ("schedpolicy", "schedpolicy-webhook"):
            cluster.kubectl("delete", kind, name, "--ignore-not-found")
    for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy"):
        cluster.kubectl("delete", kind, "schedpolicy-controller-guard", "--ignore-not-found")
