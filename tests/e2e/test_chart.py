"""The Helm chart, installed into the real apiserver, and checked with real crypto and RBAC."""

from __future__ import annotations

import base64
import json
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from prometheus_client.parser import text_string_to_metric_families

from localcluster import LocalCluster, binaries, chart
from localcluster.operator_process import OperatorProcess
from localcluster.webhook import LoopbackWebhook
from tests.e2e.kubeobjects import PAUSE_IMAGE, wait_until

pytestmark = pytest.mark.e2e
CHART = binaries.REPO / "chart"
ALL_ON = CHART / "ci" / "all-on-values.yaml"
RELEASE, NAMESPACE = "sp-e2e", "schedpolicy-e2e"
OPERATOR = f"{RELEASE}-schedpolicy"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{OPERATOR}"
WEBHOOK_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{OPERATOR}-webhook"
SINGLETON = "schedpolicy"  # the fixed name of the cluster-scoped objects, whatever the release


def helm(*args: str, check: bool = True) -> str:
    proc = subprocess.run(
        [str(binaries.path("helm")), *args], capture_output=True, text=True, timeout=300
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout


def render(*values: Path, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    extra = [a for v in values for a in ("-f", str(v))]
    out = helm(
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        namespace,
        "--kube-version",
        chart.kube_version(),
        *chart.capability_flags(chart.kube_version()),
        *extra,
    )
    return [d for d in yaml.safe_load_all(out) if d]


def test_lint_and_render_defaults_and_everything_on() -> None:
    # Exactly as a user types them first: no --kube-version, so helm assumes its newest.
    helm("lint", str(CHART))
    helm("lint", str(CHART), "-f", str(ALL_ON))
    helm("template", RELEASE, str(CHART))
    helm("template", RELEASE, str(CHART), "-f", str(ALL_ON))
    helm("lint", str(CHART), "--kube-version", chart.kube_version())
    helm("lint", str(CHART), "--kube-version", chart.kube_version(), "-f", str(ALL_ON))
    # Values that would defeat the scheduler profile's purpose are refused at render time.
    for bad, why, kube in (
        ("scheduler.name=default-scheduler", "must not be default-scheduler", "1.37.2"),
        ("scheduler.packing.gpu=1", "must weigh more than cpu and memory", "1.37.2"),
        ("dra.extendedResource.enabled=true", "needs Kubernetes 1.36 or later", "1.35.4"),
    ):
        refused = subprocess.run(
            [
                *(str(binaries.path("helm")), "template", RELEASE, str(CHART)),
                *("--set", bad, "--kube-version", kube),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode != 0, bad
        assert why in refused.stderr, (bad, refused.stderr)
    defaults = {d["kind"] for d in render()}
    everything = {d["kind"] for d in render(ALL_ON)}
    assert {
        "Deployment",
        "MutatingWebhookConfiguration",
        "ClusterRole",
        "PodDisruptionBudget",
        "Secret",
        "Service",
    } <= defaults
    assert {"ServiceMonitor", "PrometheusRule", "Certificate", "ConfigMap"} <= everything
    assert not {"ServiceMonitor", "PrometheusRule"} & defaults


def test_chart_crds_equal_the_generated_crds() -> None:
    generated = sorted(p.name for p in (binaries.REPO / "crds").glob("*.yaml"))
    shipped = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert generated == shipped
    for name in generated:
        assert (CHART / "crds" / name).read_text() == (binaries.REPO / "crds" / name).read_text()


def test_the_clusters_chart_snapshot_is_what_helm_renders_now() -> None:
    """A cluster comes up without helm, from chart-snapshot.yaml: a chart change that is
    not snapshotted (`python -m localcluster snapshot-chart`) would leave the harness
    running yesterday's RBAC and scheduler profile."""
    snapshot = yaml.safe_load(chart.SNAPSHOT.read_text())
    fresh = chart.snapshot_from_helm()
    stale = sorted(t for t in chart.HARNESS_TEMPLATES if snapshot.get(t) != fresh[t])
    assert stale == [], f"run `python -m localcluster snapshot-chart`: {stale} changed"
    assert set(snapshot) == set(chart.HARNESS_TEMPLATES)
    kinds = {d["kind"] for t in chart.HARNESS_TEMPLATES for d in chart.rendered(t)}
    assert {"ClusterRole", "ConfigMap", "MutatingWebhookConfiguration"} <= kinds
    assert "Secret" not in kinds  # the chart's CA and keys change on every render


def test_webhook_ca_bundle_verifies_the_serving_certificate() -> None:
    docs = render()
    (config,) = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    (secret,) = [d for d in docs if d["kind"] == "Secret"]
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] <= 5
    assert hook["sideEffects"] == "None"
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert (excluded["key"], excluded["operator"]) == ("kubernetes.io/metadata.name", "NotIn")
    assert {"kube-system", NAMESPACE} <= set(excluded["values"])
    assert hook["objectSelector"]["matchExpressions"] == [
        {"key": "schedpolicy.io/ignore", "operator": "DoesNotExist"}
    ]
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]

    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    key = base64.b64decode(secret["data"]["tls.key"])
    # The CA really signed the serving certificate (raises if not).
    public = ca.public_key()
    assert cert.signature_hash_algorithm is not None
    if isinstance(public, rsa.RSAPublicKey):
        public.verify(
            cert.signature,
            cert.tbs_certificate_bytes,
            padding.PKCS1v15(),
            cert.signature_hash_algorithm,
        )
    else:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        public.verify(
            cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
        )
    assert cert.issuer == ca.subject
    service = hook["clientConfig"]["service"]
    names = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName)
    assert f"{service['name']}.{service['namespace']}.svc" in names
    # And the key in the Secret belongs to that certificate.
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    private = serialization.load_pem_private_key(key, None)
    assert private.public_key().public_bytes(*spki) == cert.public_key().public_bytes(*spki)


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


def test_operator_cluster_role_grants_exactly_the_documented_rules(tmp_path: Path) -> None:
    # can-i samples the matrix; this pins the whole of it, so an added verb fails here.
    (role,) = [
        d for d in render() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == SINGLETON
    ]
    rules = {
        (group, resource): sorted(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    read = ["get", "list", "watch"]
    compiled = sorted(["create", "delete", "patch", *read])
    assert rules == {
        ("", "pods"): ["get", "list", "patch", "watch"],
        ("", "nodes"): ["get", "list", "patch", "watch"],
        ("", "namespaces"): read,
        ("apps", "replicasets"): read,
        ("resource.k8s.io", "resourceslices"): read,
        ("resource.k8s.io", "resourceclaims"): read,
        ("resource.k8s.io", "deviceclasses"): read,
        ("schedpolicy.io", "schedulingpolicies"): read,
        ("schedpolicy.io", "schedulingpolicies/status"): ["patch"],
        ("", "events"): ["create", "patch"],
        ("apiextensions.k8s.io", "customresourcedefinitions"): read,
        ("coordination.k8s.io", "leases"): ["list"],
        # Authenticated /metrics: the apiserver judges each scraper; nothing is stored.
        ("authentication.k8s.io", "tokenreviews"): ["create"],
        ("authorization.k8s.io", "subjectaccessreviews"): ["create"],
        # Policy mode (the target release serves MutatingAdmissionPolicy v1): the compiled
        # objects, which the admission guard holds to our names and to pod CREATE...
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies"): compiled,
        ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"): compiled,
        # ...and the chart's own webhook configuration, by name.
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ["get", "patch"],
    }
    named = [rule for rule in role["rules"] if "resourceNames" in rule]
    assert [(r["resources"], r["resourceNames"]) for r in named] == [
        (["mutatingwebhookconfigurations"], [SINGLETON])
    ]
    # Plain-HTTP metrics need no reviews, so the chart grants none.
    plain = tmp_path / "plain-metrics.yaml"
    plain.write_text("metrics: {secure: false}\n")
    (role,) = [
        d
        for d in render(plain)
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == SINGLETON
    ]
    assert not [r for r in role["rules"] if "tokenreviews" in r["resources"]]


def test_security_objects_render_and_the_apiserver_accepts_them(cluster: LocalCluster) -> None:
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


def test_singleton_names_do_not_depend_on_the_release() -> None:
    for release, namespace in (("a", "one"), ("other-name", "two")):
        out = helm("template", release, str(CHART), "--namespace", namespace)
        names = {
            (d["kind"], d["metadata"]["name"])
            for d in yaml.safe_load_all(out)
            if d
            and d["kind"] in ("MutatingWebhookConfiguration", "ClusterRoleBinding", "ClusterRole")
        }
        assert {
            ("MutatingWebhookConfiguration", SINGLETON),
            ("ClusterRole", SINGLETON),
            ("ClusterRoleBinding", SINGLETON),
        } <= names


def test_a_second_install_fails_and_leaves_the_first_untouched(
    cluster: LocalCluster, installed: str
) -> None:
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


# ---- dashboards ---------------------------------------------------------------------------

_PROMQL_NOISE = re.compile(
    r'"(?:[^"\\]|\\.)*"'  # strings
    r"|\{[^}]*\}"  # label matchers
    r"|\[[^\]]*\]"  # range selectors
    r"|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"  # label lists
)
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")
_PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions,
    keywords, label names or anything inside strings, matchers, ranges or groupings."""
    bare = _PROMQL_NOISE.sub(" ", expr)
    return {m for m in _IDENTIFIER.findall(bare) if m.lower() not in _PROMQL_WORDS}


def test_metric_names_reads_promql_as_prometheus_does() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, profile) (rate(a_bucket{job=~"$job",x="y{z}"}[5m])))'
        " / on (le) group_left (p) b_total + c offset 5m > bool 0.5 and d"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c", "d"}


def exported(text: str) -> set[str]:
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        suffixes = {
            "counter": ["_total", "_created"],
            "histogram": ["_bucket", "_sum", "_count", "_created"],
            "summary": ["_sum", "_count"],
        }.get(family.type, [])
        names.update(family.name + s for s in suffixes)
        names.update(s.name for s in family.samples)
    return names


def scrape_scheduler(cluster: LocalCluster, token: str | None) -> str:
    """The secondary scheduler's HTTPS /metrics, as a Prometheus with this token sees it."""
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    url = f"https://127.0.0.1:{cluster.ports.secondary_scheduler}/metrics"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, context=insecure, timeout=5) as resp:
        return str(resp.read().decode())


def prometheus_token(cluster: LocalCluster) -> str:
    """A token of the Prometheus ServiceAccount the all-on values name, bound by the chart's
    own metrics-reader ClusterRole and binding."""
    rbac = [
        d
        for d in render(ALL_ON)
        if d["kind"] in ("ClusterRole", "ClusterRoleBinding")
        and d["metadata"]["name"].endswith("-metrics-reader")
    ]
    assert sorted(d["kind"] for d in rbac) == ["ClusterRole", "ClusterRoleBinding"]
    (subject,) = next(d for d in rbac if d["kind"] == "ClusterRoleBinding")["subjects"]
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": subject["namespace"]},
    }
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": subject["name"], "namespace": subject["namespace"]},
    }
    cluster.kubectl("apply", "-f", "-", objects=[namespace, account, *rbac])
    return cluster.kubectl("create", "token", subject["name"], "-n", subject["namespace"]).strip()


def test_dashboards_query_only_exported_metrics(
    cluster: LocalCluster, operator: OperatorProcess, tmp_path: Path
) -> None:
    webhook = LoopbackWebhook(cluster, tmp_path, "dashboard-probe").start(tmp_path / "webhook.log")
    try:
        # Give the secondary scheduler something to schedule, so its attempt metrics exist.
        cluster.kubectl(
            "run",
            "dash-probe",
            "-n",
            "default",
            f"--image={PAUSE_IMAGE}",
            "--overrides",
            json.dumps({"spec": {"schedulerName": "schedpolicy-scheduler"}}),
        )
        wait_until(
            lambda: (
                cluster.kubectl(
                    "get", "pod", "dash-probe", "-n", "default", "-o", "jsonpath={.spec.nodeName}"
                ).strip()
                or None
            ),
            within=30,
            what="the probe pod to be scheduled",
        )
        ours = exported(operator.scrape()) | exported(webhook.scrape())
        theirs = exported(scrape_scheduler(cluster, prometheus_token(cluster)))
        # Without the token the scheduler refuses: its /metrics really is behind the chart's
        # bearer-token authorization, which the ServiceMonitor relies on.
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape_scheduler(cluster, None)
        assert refused.value.code in (401, 403)
    finally:
        webhook.stop()
        cluster.kubectl(
            "delete", "pod", "dash-probe", "-n", "default", "--grace-period=0", "--wait=false"
        )
        cluster.kubectl("delete", "namespace", "monitoring", "--ignore-not-found", "--wait=false")
        for kind in ("clusterrole", "clusterrolebinding"):
            cluster.kubectl("delete", kind, f"{OPERATOR}-metrics-reader", "--ignore-not-found")

    rendered = {d["metadata"]["name"]: d for d in render(ALL_ON) if d["kind"] == "ConfigMap"}
    dashboards = [d for name, d in rendered.items() if "-dashboard-" in name]
    assert len(dashboards) == 2
    for cm in dashboards:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        for key, text in cm["data"].items():
            board = json.loads(text)
            queries = [t["expr"] for p in board["panels"] for t in p["targets"]]
            assert queries, key
            used = {m for q in queries for m in metric_names(q)}
            assert used, key
            unknown = used - ours - theirs
            assert unknown == set(), f"{key} queries metrics nobody exports: {unknown}"
    # Each dashboard shows what the chart promises, as panels that query the right metric.
    boards = {
        json.loads(text)["uid"]: json.loads(text)["panels"]
        for cm in dashboards
        for text in cm["data"].values()
    }
    promised = {
        "schedpolicy-operator": {
            "Cost writes/s by result": "schedpolicy_cost_writes_total",
            "Cost writes skipped/s by reason": "schedpolicy_cost_skipped_total",
            "Reconcile duration p95": "schedpolicy_reconcile_duration_seconds_bucket",
            "Pods per cost band": "schedpolicy_cost_band_pods",
            "Node label writes/s by result": "schedpolicy_node_label_writes_total",
            "Webhook latency p50 / p99": "schedpolicy_webhook_duration_seconds_bucket",
            "GPU nodes labelled, by policy": "schedpolicy_gpu_nodes_labelled",
            "Controller replicas leading": "schedpolicy_leader",
        },
        "schedpolicy-scheduler": {
            "Scheduling attempt duration p95 by profile and result": (
                "scheduler_scheduling_attempt_duration_seconds_bucket"
            ),
            "Scheduling attempts/s by result": "scheduler_schedule_attempts_total",
        },
    }
    for uid, panels in promised.items():
        shown = {
            p["title"]: {m for t in p["targets"] for m in metric_names(t["expr"])}
            for p in boards[uid]
        }
        for title, metric in panels.items():
            assert metric in shown.get(title, set()), f"{uid}: no panel {title!r} on {metric}"


def test_a_metrics_cert_secret_is_mounted_and_served_by_both_processes(tmp_path: Path) -> None:
    values = tmp_path / "cert.yaml"
    values.write_text("metrics: {certSecret: metrics-tls}\n")
    deployments = [d for d in render(values) if d["kind"] == "Deployment"]
    ours = [d for d in deployments if "scheduler" not in d["metadata"]["name"]]
    assert len(ours) == 2
    for d in ours:
        pod = d["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert "--metrics-cert=/metrics-tls/tls.crt" in container["args"]
        assert "--metrics-key=/metrics-tls/tls.key" in container["args"]
        assert {"name": "metrics-tls", "mountPath": "/metrics-tls", "readOnly": True} in container[
            "volumeMounts"
        ]
        assert {"name": "metrics-tls", "secret": {"secretName": "metrics-tls"}} in pod["volumes"]


def _controller_args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == OPERATOR
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_the_controller_is_told_the_guards_label_prefixes(tmp_path: Path) -> None:
    """The controller refuses a policy prefix the guard would deny, so it must be told the
    same list the guard's CEL is rendered from, and nothing when there is no guard."""
    values = tmp_path / "prefixes.yaml"
    values.write_text(
        "security: {admissionGuard: {nodeLabelPrefixes: [schedpolicy.io, gpus.example.com]}}\n"
    )
    docs = render(values)
    assert "--admitted-label-prefixes=schedpolicy.io,gpus.example.com" in _controller_args(docs)
    (guard,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    cel = json.dumps(guard["spec"])
    assert "'schedpolicy.io/'" in cel
    assert "'gpus.example.com/'" in cel
    off = tmp_path / "off.yaml"
    off.write_text("security: {admissionGuard: {enabled: false}}\n")
    assert not [a for a in _controller_args(render(off)) if a.startswith("--admitted-label")]
