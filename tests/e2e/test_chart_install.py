"""`helm install` of the chart into the real apiserver, checked with real RBAC: every object
accepted and the pods running, least privilege as the apiserver judges it, a second install
refused, and an uninstall that leaves only the CRD.

The tests share one install, made by the first of them and removed by the last.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from localcluster import LocalCluster, binaries, chart
from tests.e2e.conftest import (
    ALL_ON,
    CHART,
    NAMESPACE,
    OPERATOR,
    RELEASE,
    SINGLETON,
    helm,
    render,
)
from tests.e2e.kubeobjects import wait_until

pytestmark = pytest.mark.e2e
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{OPERATOR}"
WEBHOOK_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{OPERATOR}-webhook"


def can_i(cluster: LocalCluster, *args: str, account: str = ACCOUNT) -> bool:
    # `can-i` exits 1 for "no", so the exit code says nothing; the answer must be one of
    # the two words, or a typo in a resource name would pass as a "no".
    out = cluster.kubectl("auth", "can-i", *args, f"--as={account}", check=False).strip()
    assert out in ("yes", "no"), f"kubectl auth can-i {' '.join(args)}: {out!r}"
    return out == "yes"


@pytest.fixture(scope="module")
def crd_before_install(cluster: LocalCluster, crd: str) -> str:
    """The UID of the suite's CRD, which is then deleted: Helm installs `chart/crds` only
    where the CRD is absent, and the install must be seen to bring its own."""
    uid = cluster.kubectl("get", "crd", crd, "-o", "jsonpath={.metadata.uid}")
    cluster.kubectl("delete", "crd", crd, "--wait=true")
    return uid


@pytest.fixture(scope="module")
def installed(cluster: LocalCluster, crd: str, crd_before_install: str) -> Iterator[str]:
    # The local cluster applied the chart's operator RBAC by hand for its own operator
    # process; the chart refuses to install over that, as it would over any other install.
    cluster.remove_operator_singleton()
    helm(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        f"--kubeconfig={cluster.kubeconfig}",
        "--wait",
        "--timeout=180s",
    )
    # The local operator's account keeps the chart's ClusterRole (now the release's) while
    # the release holds the name, for the tests here that run it.
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        "schedpolicy-local",
        f"--clusterrole={SINGLETON}",
        f"--serviceaccount={chart.NAMESPACE}:{SINGLETON}",
    )
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        "schedpolicy-webhook-local",
        f"--clusterrole={SINGLETON}-webhook",
        f"--serviceaccount={chart.NAMESPACE}:{SINGLETON}-webhook",
    )
    try:
        yield helm(
            "get",
            "manifest",
            RELEASE,
            "--namespace",
            NAMESPACE,
            f"--kubeconfig={cluster.kubeconfig}",
        )
    finally:
        helm(
            "uninstall",
            RELEASE,
            "--namespace",
            NAMESPACE,
            f"--kubeconfig={cluster.kubeconfig}",
            "--wait",
            check=False,
        )
        for binding in ("schedpolicy-local", "schedpolicy-webhook-local"):
            cluster.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")
        cluster.apply_operator_rbac()


@pytest.mark.compat
def test_install_accepts_every_object_and_runs_the_pods(
    cluster: LocalCluster, installed: str, crd: str, crd_before_install: str
) -> None:
    """`helm install --wait` into the real apiserver: every object of the manifest is
    accepted, the chart brings its own CRD, and the controller, webhook and scheduler pods
    (two of each) run as non-root on a read-only root with no capabilities."""
    # The CRD is Helm's now: created by this install from chart/crds, and established.
    assert cluster.kubectl("get", "crd", crd, "-o", "jsonpath={.metadata.uid}") not in (
        "",
        crd_before_install,
    )
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    manifest = [d for d in yaml.safe_load_all(installed) if d]
    found = cluster.kubectl("get", "-f", "-", "-o", "name", input=installed).split()
    assert len(found) == len(manifest)

    def running() -> list[dict[str, Any]] | None:
        pods = json.loads(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))["items"]
        ok = len(pods) == 6 and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    pods = wait_until(running, within=60, what="the controller, webhook and scheduler pods")
    components = sorted(p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods)
    assert components == ["operator"] * 2 + ["scheduler"] * 2 + ["webhook"] * 2
    for pod in pods:
        security = pod["spec"]["containers"][0]["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"]["drop"] == ["ALL"]
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"


def test_operator_rbac_is_least_privilege(cluster: LocalCluster, installed: str) -> None:
    """As `kubectl auth can-i` answers for the installed controller's ServiceAccount: it may
    patch pods, nodes and policy status, post Events and renew its Lease, and it may not
    delete pods or nodes, read Secrets, or change Deployments or the policies' spec."""
    allowed = [
        ("patch", "pods", "-A"),
        ("patch", "nodes"),
        ("patch", "schedulingpolicies.schedpolicy.io", "--subresource=status"),
        ("create", "events", "-n", "default"),
        ("update", "leases.coordination.k8s.io/schedpolicy", "-n", NAMESPACE),
        ("watch", "resourceslices.resource.k8s.io"),
        ("watch", "resourceclaims.resource.k8s.io", "-A"),
    ]
    denied = [
        ("delete", "pods", "-A"),
        ("patch", "resourceclaims.resource.k8s.io", "-A"),  # allocation is the scheduler's
        ("create", "resourceslices.resource.k8s.io"),
        ("delete", "nodes"),
        ("get", "secrets", "-A"),
        ("get", "secrets", "-n", NAMESPACE),
        ("patch", "deployments.apps", "-A"),
        ("create", "pods", "-A"),
        ("patch", "schedulingpolicies.schedpolicy.io"),  # the spec is the admin's
        ("update", "leases.coordination.k8s.io", "-n", "kube-system"),
        ("delete", "schedulingpolicies.schedpolicy.io"),
        ("patch", "mutatingwebhookconfigurations/someone-elses"),
        ("create", "validatingadmissionpolicies.admissionregistration.k8s.io"),
    ]
    assert [a for a in allowed if not can_i(cluster, *a)] == []
    assert [d for d in denied if can_i(cluster, *d)] == []


def test_webhook_rbac_only_reads_what_hints_need(cluster: LocalCluster, installed: str) -> None:
    """The installed webhook's ServiceAccount only reads what hints need (policies,
    namespaces, nodes) and may not touch pods, Secrets, Events or Leases; its ClusterRole
    grants exactly that."""
    allowed = [
        ("watch", "schedulingpolicies.schedpolicy.io"),
        ("list", "namespaces"),
        ("watch", "nodes"),
    ]
    denied = [
        ("patch", "pods", "-A"),
        ("get", "pods", "-A"),
        ("list", "pods", "-A"),
        ("patch", "nodes"),
        ("get", "secrets", "-A"),
        ("create", "events", "-n", "default"),
        ("update", "leases.coordination.k8s.io", "-n", NAMESPACE),
    ]
    assert [a for a in allowed if not can_i(cluster, *a, account=WEBHOOK_ACCOUNT)] == []
    assert [d for d in denied if can_i(cluster, *d, account=WEBHOOK_ACCOUNT)] == []
    (role,) = [
        d
        for d in render()
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{SINGLETON}-webhook"
    ]
    rules = {
        (group, resource): sorted(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert rules == {
        ("schedpolicy.io", "schedulingpolicies"): ["list", "watch"],
        ("", "namespaces"): ["list", "watch"],
        ("", "nodes"): ["list", "watch"],
        ("authentication.k8s.io", "tokenreviews"): ["create"],
        ("authorization.k8s.io", "subjectaccessreviews"): ["create"],
    }


def test_security_objects_render_and_the_apiserver_accepts_them(cluster: LocalCluster) -> None:
    """With everything on, the NetworkPolicies (admission from anywhere, /metrics from the
    monitoring namespace only) and the admission guard render and pass the apiserver's dry
    run, and the controller's ServiceMonitor scrapes over HTTPS with the ServiceAccount's
    token."""
    docs = render(ALL_ON)
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert sorted(p["metadata"]["name"] for p in policies) == [
        f"{OPERATOR}-{c}" for c in ("operator", "scheduler", "webhook")
    ]
    (webhook,) = [p for p in policies if p["metadata"]["name"].endswith("-webhook")]
    # Admission from anywhere (no `from`), /metrics only from the monitoring namespace.
    assert webhook["spec"]["ingress"][0] == {"ports": [{"protocol": "TCP", "port": 9443}]}
    assert webhook["spec"]["ingress"][1]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    guard = [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert len(guard) == 2
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    out = cluster.kubectl("apply", "--dry-run=server", "-f", "-", objects=policies + guard)
    assert out.count("(server dry run)") == 5, out
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    operator = next(m for m in monitors if m["metadata"]["name"] == OPERATOR)
    (endpoint,) = operator["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"].endswith("serviceaccount/token")


def test_a_second_install_fails_and_leaves_the_first_untouched(
    cluster: LocalCluster, installed: str
) -> None:
    """A second `helm install` in another namespace fails, naming the first release and
    saying there is one install per cluster, and leaves every object of the first untouched."""

    def versions() -> dict[str, str]:
        items = json.loads(cluster.kubectl("get", "-f", "-", "-o", "json", input=installed))
        return {
            f"{i['kind']}/{i['metadata'].get('namespace', '')}/{i['metadata']['name']}": i[
                "metadata"
            ]["resourceVersion"]
            for i in items["items"]
        }

    before = versions()
    second = subprocess.run(
        [
            str(binaries.path("helm")),
            "install",
            "sp-second",
            str(CHART),
            "--namespace",
            "schedpolicy-second",
            "--create-namespace",
            f"--kubeconfig={cluster.kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert second.returncode != 0
        assert f'release "{RELEASE}" in namespace "{NAMESPACE}"' in second.stderr, second.stderr
        assert "one install per cluster" in second.stderr
        assert versions() == before
        releases = helm("list", "-A", "-q", f"--kubeconfig={cluster.kubeconfig}").split()
        assert "sp-second" not in releases
    finally:
        cluster.kubectl("delete", "namespace", "schedpolicy-second", "--ignore-not-found")


@pytest.mark.compat
def test_uninstall_removes_everything_but_the_crd(
    cluster: LocalCluster, installed: str, crd: str
) -> None:
    """`helm uninstall` removes every object of the release but the CRD, so that no admin
    loses their policies to an uninstall."""
    helm(
        "uninstall",
        RELEASE,
        "--namespace",
        NAMESPACE,
        f"--kubeconfig={cluster.kubeconfig}",
        "--wait",
    )
    left = cluster.kubectl(
        "get", "-f", "-", "-o", "name", "--ignore-not-found", input=installed
    ).split()
    assert left == []
    # Helm's CRD policy: never deleted, so no admin loses their policies to an uninstall.
    assert cluster.kubectl("get", "crd", crd, "-o", "name").strip()
    cluster.apply_operator_rbac()  # the local operator's, for the tests after this one
