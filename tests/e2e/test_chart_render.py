"""The chart as `helm lint` and `helm template` render it, before anything is installed: the
CRDs, the harness's snapshot, the webhook's certificate, the RBAC rules, the fixed names, and
the flags each process is given."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from localcluster import binaries, chart
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

pytestmark = pytest.mark.e2e


def test_lint_and_render_defaults_and_everything_on() -> None:
    """`helm lint` and `helm template` pass as a user first types them, with the defaults
    and with everything on; values that would defeat the scheduler profile's purpose are
    refused at render time, saying why; and monitoring objects render only when asked for."""
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
    assert "PriorityClass" in everything
    assert "PriorityClass" not in defaults


def test_gpu_headroom_renders_placeholders_any_serving_pod_preempts() -> None:
    """With `headroom.replicas`, the chart deploys that many 1-GPU placeholders at a priority
    below every serving pod, never preempting anything themselves, placed by the chart's
    packing profile, as the restricted Pod Security Standard asks; with 0, nothing."""
    assert not [d for d in render() if d["metadata"]["name"].endswith("-headroom")]
    docs = {d["kind"]: d for d in render(ALL_ON) if d["metadata"]["name"].endswith("-headroom")}
    assert set(docs) == {"PriorityClass", "Deployment"}
    priority = docs["PriorityClass"]
    assert priority["value"] < 0
    assert priority["preemptionPolicy"] == "Never"
    assert priority["globalDefault"] is False
    deployment = docs["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == priority["metadata"]["name"]
    assert pod["schedulerName"] == "schedpolicy-scheduler"
    assert pod["terminationGracePeriodSeconds"] == 0
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]


def test_chart_crds_equal_the_generated_crds() -> None:
    """The chart ships exactly the CRDs in crds/, so `helm install` and `kubectl apply -f
    crds/` give the same API."""
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
    """The webhook configuration fails open within 5 s, is called for pod CREATE only, skips
    kube-system, the release's namespace and opted-out pods, and its caBundle verifies the
    serving certificate in the Secret, whose key matches it."""
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


def test_operator_cluster_role_grants_exactly_the_documented_rules(tmp_path: Path) -> None:
    """The controller's ClusterRole grants exactly the documented rules, so an added verb
    fails here; with plain-HTTP metrics it grants no token reviews."""
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


def test_singleton_names_do_not_depend_on_the_release() -> None:
    """Whatever the release's name and namespace, the webhook configuration, ClusterRole and
    ClusterRoleBinding are named `schedpolicy`, so a cluster holds one of each."""
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


def test_a_metrics_cert_secret_is_mounted_and_served_by_both_processes(tmp_path: Path) -> None:
    """With `metrics.certSecret` set, the controller and the webhook mount that Secret and
    serve /metrics with its certificate and key."""
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
