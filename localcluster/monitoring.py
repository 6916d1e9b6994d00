"""The monitoring stack as users run it, on the real node: prometheus-operator from the
release bundle of the Go module `make tools` builds it from, and one Prometheus that it
manages, selecting every ServiceMonitor and PrometheusRule in the cluster.

The images are the ones `make image` built from those binaries, at the refs the bundle and
the operator ask for, so nothing is pulled. Prometheus is read through the apiserver's pod
proxy: the test talks to the real API server and nothing else.
"""

from __future__ import annotations

import functools
import json
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries
from localcluster.component import ClusterError, Kubectl
from localcluster.node import LABEL as REAL_NODE

NAMESPACE = "monitoring"
SERVICE_ACCOUNT = "prometheus"
NAME = "schedpolicy-e2e"
POD = f"prometheus-{NAME}-0"
OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
ON_THE_REAL_NODE = {
    "nodeSelector": {REAL_NODE: "true"},
    "tolerations": [{"key": REAL_NODE, "operator": "Exists", "effect": "NoSchedule"}],
}


@functools.cache
def operator_module() -> Path:
    proc = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", OPERATOR_MODULE],
        cwd=binaries.REPO / "tools" / "prometheus-operator",
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return Path(proc.stdout.strip())


def prometheus_version() -> str:
    out = subprocess.run(
        [str(binaries.path("prometheus")), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return "v" + out.split()[2]


def established(cluster: Kubectl, crd: str, within: float = 60) -> None:
    """`kubectl wait --for=condition=Established`, again while the apiserver has not yet
    given a CRD just created any status: kubectl then fails at once ("accessor error")
    instead of waiting."""
    deadline = time.monotonic() + within
    while True:
        try:
            cluster.kubectl("wait", "--for=condition=Established", "--timeout=30s", crd)
            return
        except ClusterError as err:
            if "accessor error" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(1)


def install_operator(cluster: Kubectl) -> None:
    """The bundle as released (CRDs, RBAC, the operator in `default`), with one change: the
    operator's pod goes to the real node, the only node that runs containers."""
    bundle = operator_module() / "bundle.yaml"
    # Server-side: the CRDs are too large for client-side apply's last-applied annotation.
    cluster.kubectl("apply", "--server-side", "-f", str(bundle), timeout=180)
    for crd in ("servicemonitors", "prometheusrules", "prometheuses"):
        established(cluster, f"crd/{crd}.monitoring.coreos.com")
    patch = {"spec": {"template": {"spec": ON_THE_REAL_NODE}}}
    cluster.kubectl(
        "patch", "deployment", "prometheus-operator", "-n", "default", "-p", json.dumps(patch)
    )
    cluster.kubectl(
        "rollout",
        "status",
        "deployment/prometheus-operator",
        "-n",
        "default",
        "--timeout=180s",
        timeout=200,
    )


def prometheus_objects(scrape_interval: str = "5s") -> list[dict[str, Any]]:
    """Prometheus's ServiceAccount and its RBAC from the module's example, and the
    Prometheus object: every ServiceMonitor and PrometheusRule, in every namespace."""
    rbac_dir = operator_module() / "example" / "rbac" / "prometheus"
    role = yaml.safe_load((rbac_dir / "prometheus-cluster-role.yaml").read_text())
    role["metadata"]["name"] = f"{NAME}-prometheus"
    # Without the example's own GET on /metrics: the scheduler's must come from the chart's
    # metrics-reader binding, which is what the chart promises to set up.
    role["rules"] = [r for r in role["rules"] if "nonResourceURLs" not in r]
    version = prometheus_version()
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{NAME}-prometheus"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
            ],
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "Prometheus",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "replicas": 1,
                "image": f"quay.io/prometheus/prometheus:{version}",
                "version": version,
                "serviceAccountName": SERVICE_ACCOUNT,
                "serviceMonitorSelector": {},
                "serviceMonitorNamespaceSelector": {},
                "ruleSelector": {},
                "ruleNamespaceSelector": {},
                "scrapeInterval": scrape_interval,
                "evaluationInterval": scrape_interval,
                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
                **ON_THE_REAL_NODE,
            },
        },
    ]


def install_prometheus(cluster: Kubectl, timeout: float = 240) -> None:
    cluster.kubectl("apply", "-f", "-", objects=prometheus_objects())
    wait_for_prometheus(cluster, timeout)


def wait_for_prometheus(cluster: Kubectl, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cluster.kubectl(
            "get",
            "pod",
            POD,
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.status.containerStatuses[*].ready}",
            check=False,
        ).split()
        if got and all(r == "true" for r in got):
            return
        time.sleep(2)
    described = cluster.kubectl("describe", "pod", POD, "-n", NAMESPACE, check=False)
    raise TimeoutError(f"Prometheus pod {POD} not ready in {timeout:.0f}s:\n{described[-3000:]}")


def uninstall(cluster: Kubectl) -> None:
    cluster.kubectl(
        "delete",
        "-f",
        "-",
        "--ignore-not-found",
        "--wait=false",
        objects=prometheus_objects(),
        check=False,
    )
    bundle = operator_module() / "bundle.yaml"
    cluster.kubectl("delete", "-f", str(bundle), "--ignore-not-found", "--wait=false", check=False)


class Monitoring:
    """The stack as one component: the operator, then Prometheus, ready once its pod is."""

    name = "monitoring"
    startup_timeout = 240

    def __init__(self, cluster: Kubectl) -> None:
        self.cluster = cluster

    def start(self) -> None:
        install_operator(self.cluster)
        self.cluster.kubectl("apply", "-f", "-", objects=prometheus_objects())

    def ready(self, timeout: float) -> None:
        wait_for_prometheus(self.cluster, timeout)

    def stop(self) -> None:
        uninstall(self.cluster)


class PrometheusAPI:
    """Prometheus's HTTP API through the apiserver's proxy to its pod."""

    def __init__(self, cluster: Kubectl) -> None:
        self.cluster = cluster

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        raw = self.cluster.kubectl(
            "get",
            "--raw",
            f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}:9090/proxy/api/v1/{path}{query}",
        )
        body = json.loads(raw)
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus {path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.get("query", query=expr)["result"])

    def query_range(self, expr: str, seconds: float, step: str = "5s") -> list[dict[str, Any]]:
        end = time.time()
        data = self.get(
            "query_range", query=expr, start=f"{end - seconds:.3f}", end=f"{end:.3f}", step=step
        )
        return list(data["result"])
