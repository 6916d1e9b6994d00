"""The chart's ValidatingAdmissionPolicy, judged by the real apiserver: with the controller's
ServiceAccount token, only the cost annotation on pods and our labels and annotation on
nodes can change, whichever kind of write carries the change."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from localcluster import LocalCluster, binaries, chart
from localcluster.operator_process import OperatorProcess
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import Pool, gpu_label_policy

pytestmark = pytest.mark.e2e

COST = "controller.kubernetes.io/pod-deletion-cost"
OWNED = "schedpolicy.io/owned-labels"
GUARD = "schedpolicy-controller-guard"
ACCOUNT = "schedpolicy"  # the chart's controller ServiceAccount, release "schedpolicy"


def _as_controller(cluster: LocalCluster, *args: str, stdin: str | None = None) -> tuple[int, str]:
    proc = subprocess.run(
        [str(binaries.path("kubectl")), f"--kubeconfig={cluster.operator_kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _denied(cluster: LocalCluster, *args: str, stdin: str | None = None) -> str:
    rc, out = _as_controller(cluster, *args, stdin=stdin)
    assert rc != 0, f"the apiserver accepted kubectl {' '.join(args)}: {out}"
    assert f"ValidatingAdmissionPolicy '{GUARD}'" in out, out
    return out


def _allowed(cluster: LocalCluster, *args: str, stdin: str | None = None) -> None:
    rc, out = _as_controller(cluster, *args, stdin=stdin)
    assert rc == 0, out


def _get(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", *args, "-o", "json")))


@pytest.fixture
def pod(cluster: LocalCluster, namespace: str) -> str:
    """A pod no scheduler takes, so that nothing else changes it under the test. Created,
    not applied: `kubectl replace` would rewrite an apply's last-applied annotation."""
    cluster.kubectl(
        "create",
        "-f",
        "-",
        objects=[
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "guarded", "namespace": namespace, "labels": {"app": "a"}},
                "spec": {
                    "schedulerName": "nobody",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            }
        ],
    )
    return "guarded"


@pytest.fixture
def node(cluster: LocalCluster, namespace: str) -> Iterator[str]:
    pool = Pool(cluster, namespace)
    (made,) = pool.create(pool.node("guarded"))
    yield made.name
    pool.cleanup()


def test_the_guard_is_installed_from_the_chart(cluster: LocalCluster) -> None:
    """The chart's admission guard is in place: a ValidatingAdmissionPolicy that matches the
    controller's ServiceAccount, bound to Deny."""
    policy = _get(cluster, "validatingadmissionpolicy", GUARD)
    (match,) = policy["spec"]["matchConditions"]
    assert f"system:serviceaccount:{chart.NAMESPACE}:{ACCOUNT}'" in match["expression"]
    binding = _get(cluster, "validatingadmissionpolicybinding", GUARD)
    assert binding["spec"]["validationActions"] == ["Deny"]


@pytest.mark.parametrize(
    ("patch_type", "patch", "field"),
    [
        ("json", [{"op": "add", "path": "/metadata/labels/evil", "value": "x"}], "labels[evil]"),
        ("merge", {"metadata": {"labels": {"app": None}}}, "labels[app]"),
        ("strategic", {"metadata": {"annotations": {"other": "1"}}}, "annotations[other]"),
        (
            "json",
            [{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:1"}],
            "spec.containers",
        ),
        (
            "merge",
            {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}},
            "spec.tolerations",
        ),
        ("merge", {"metadata": {"finalizers": ["example.com/hold"]}}, "metadata.finalizers"),
        # The allowed annotation does not carry a forbidden change through with it.
        ("merge", {"metadata": {"annotations": {COST: "5"}, "labels": {"x": "y"}}}, "labels[x]"),
    ],
    ids=[
        "json-label",
        "merge-label-removal",
        "other-annotation",
        "image",
        "toleration",
        "finalizer",
        "cost-with-label",
    ],
)
def test_pod_changes_beyond_the_cost_are_denied_naming_the_field(
    cluster: LocalCluster, namespace: str, pod: str, patch_type: str, patch: Any, field: str
) -> None:
    """As the controller, any pod change beyond the cost annotation (a label, another
    annotation, the image, a toleration, a finalizer, or a label sent along with the cost)
    is denied, the refusal names the field, and the pod is unchanged."""
    before = _get(cluster, "pod", pod, "-n", namespace)
    out = _denied(
        cluster,
        "patch",
        "pod",
        pod,
        "-n",
        namespace,
        f"--type={patch_type}",
        "-p",
        json.dumps(patch),
    )
    assert field in out, out
    after = _get(cluster, "pod", pod, "-n", namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.fixture
def widened(cluster: LocalCluster, namespace: str) -> str:
    """RBAC widened in one namespace, as a later mistake might: update and delete on pods
    for the controller's ServiceAccount. The guard must hold regardless."""
    cluster.kubectl(
        "create", "role", "widened", "-n", namespace, "--verb=update,delete", "--resource=pods"
    )
    cluster.kubectl(
        "create",
        "rolebinding",
        "widened",
        "-n",
        namespace,
        "--role=widened",
        f"--serviceaccount={chart.NAMESPACE}:{ACCOUNT}",
    )
    return namespace


def test_a_plain_update_and_an_apply_are_judged_like_a_patch(
    cluster: LocalCluster, widened: str, pod: str
) -> None:
    """Where RBAC is widened to update pods, a `kubectl replace` or a server-side apply that
    changes a label is denied as a patch would be, naming the field, while the same replace
    with only the cost changed goes through."""
    current = _get(cluster, "pod", pod, "-n", widened)
    current["metadata"]["labels"]["app"] = "b"
    out = _denied(cluster, "replace", "-f", "-", stdin=json.dumps(current))
    assert "metadata.labels[app]" in out
    # The same update with only the cost changed is allowed: the guard, not RBAC, decided.
    current = _get(cluster, "pod", pod, "-n", widened)
    current["metadata"].setdefault("annotations", {})[COST] = "3"
    _allowed(cluster, "replace", "-f", "-", stdin=json.dumps(current))
    applied = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": widened, "labels": {"stolen": "1"}},
    }
    out = _denied(
        cluster,
        "apply",
        "--server-side",
        "--field-manager=evil",
        "-f",
        "-",
        stdin=json.dumps(applied),
    )
    assert "metadata.labels[stolen]" in out


def test_a_delete_is_denied_even_where_rbac_allows_it(
    cluster: LocalCluster, widened: str, pod: str
) -> None:
    """Where RBAC is widened to delete pods, the controller's delete is still denied (it may
    only update pods), and the pod stays."""
    out = _denied(cluster, "delete", "pod", pod, "-n", widened, "--wait=false")
    assert "may only update pods, not DELETE" in out
    assert _get(cluster, "pod", pod, "-n", widened)["metadata"]["name"] == pod


def test_the_cost_annotation_is_allowed_however_it_is_written(
    cluster: LocalCluster, namespace: str, pod: str
) -> None:
    """As the controller, the cost annotation can be added, replaced and removed, by merge
    patch or JSON patch alike."""
    base = ["patch", "pod", pod, "-n", namespace]
    _allowed(
        cluster, *base, "--type=merge", "-p", json.dumps({"metadata": {"annotations": {COST: "7"}}})
    )
    replace = [
        {"op": "replace", "path": f"/metadata/annotations/{COST.replace('/', '~1')}", "value": "9"}
    ]
    _allowed(cluster, *base, "--type=json", "-p", json.dumps(replace))
    assert _get(cluster, "pod", pod, "-n", namespace)["metadata"]["annotations"][COST] == "9"
    _allowed(
        cluster,
        *base,
        "--type=merge",
        "-p",
        json.dumps({"metadata": {"annotations": {COST: None}}}),
    )
    assert COST not in _get(cluster, "pod", pod, "-n", namespace)["metadata"].get("annotations", {})


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"spec": {"taints": [{"key": "evil", "effect": "NoSchedule"}]}}, "spec.taints"),
        ({"spec": {"unschedulable": True}}, "spec.unschedulable"),
        (
            {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}},
            "labels[node-role.kubernetes.io/control-plane]",
        ),
        ({"metadata": {"labels": {"type": None}}}, "labels[type]"),
        (
            {"metadata": {"labels": {"schedpolicy.iox/gpu-model": "A100"}}},
            "labels[schedpolicy.iox/gpu-model]",
        ),
        ({"metadata": {"annotations": {"other": "1"}}}, "annotations[other]"),
    ],
    ids=[
        "taint",
        "cordon",
        "kubernetes-label",
        "foreign-label-removal",
        "lookalike-prefix",
        "other-annotation",
    ],
)
def test_node_changes_beyond_our_labels_are_denied_naming_the_field(
    cluster: LocalCluster, node: str, patch: dict[str, Any], field: str
) -> None:
    """As the controller, any node change beyond our labels and annotation (a taint, a
    cordon, a kubernetes.io label, removing someone's label, a look-alike prefix, another
    annotation) is denied, naming the field, and the node is unchanged."""
    before = _get(cluster, "node", node)
    out = _denied(cluster, "patch", "node", node, "--type=merge", "-p", json.dumps(patch))
    assert field in out, out
    after = _get(cluster, "node", node)
    assert after["metadata"].get("labels") == before["metadata"].get("labels")
    assert after["spec"] == before["spec"]


def test_our_node_labels_and_annotation_are_allowed(cluster: LocalCluster, node: str) -> None:
    """As the controller, our GPU labels and the owned-labels annotation can be set on a
    node and removed again."""
    patch = {
        "metadata": {
            "labels": {
                "schedpolicy.io/gpu-model": "H100",
                "schedpolicy.io/gpu-memory-mib": "81559",
            },
            "annotations": {OWNED: "schedpolicy.io/gpu-model,schedpolicy.io/gpu-memory-mib"},
        }
    }
    _allowed(cluster, "patch", "node", node, "--type=merge", "-p", json.dumps(patch))
    labels = _get(cluster, "node", node)["metadata"]["labels"]
    assert labels["schedpolicy.io/gpu-model"] == "H100"
    removal = {"metadata": {"labels": {"schedpolicy.io/gpu-model": None}}}
    _allowed(cluster, "patch", "node", node, "--type=strategic", "-p", json.dumps(removal))
    assert "schedpolicy.io/gpu-model" not in _get(cluster, "node", node)["metadata"]["labels"]


def test_another_identity_is_unaffected(
    cluster: LocalCluster, namespace: str, pod: str, node: str
) -> None:
    """An admin is not held by the guard: their labels, annotations and taints go through."""
    cluster.kubectl("label", "pod", pod, "-n", namespace, "admin=yes")
    cluster.kubectl("annotate", "pod", pod, "-n", namespace, "other=1")
    cluster.kubectl("taint", "node", node, "admin=yes:NoSchedule")
    assert _get(cluster, "pod", pod, "-n", namespace)["metadata"]["labels"]["admin"] == "yes"
    taints = _get(cluster, "node", node)["spec"]["taints"]
    assert {"key": "admin", "value": "yes", "effect": "NoSchedule"} in taints


def test_a_policy_prefix_outside_the_guard_shows_as_degraded(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess, policies: list[str]
) -> None:
    """The apiserver as the backstop: an operator not told the guard's prefixes (run by
    hand, or by an older chart) has its label writes under an unlisted labelPrefix denied,
    and says so in the policy's status. test_admitted_prefixes covers the chart's way."""
    pool = Pool(cluster, namespace)
    (made,) = pool.create(pool.node("p4d", instance_type="p4d.24xlarge", gpus="8", cpu="96"))
    name = f"unlisted-prefix-{pool.tag}"
    policy = gpu_label_policy(name, "gpus.example.com", pool.selector)
    cluster.kubectl("apply", "-f", "-", objects=[policy])
    policies.append(name)
    try:

        def degraded() -> dict[str, Any] | None:
            for cond in (
                _get(cluster, "schedulingpolicy", name).get("status", {}).get("conditions", [])
            ):
                if cond["type"] == "Degraded" and cond["status"] == "True":
                    return dict(cond)
            return None

        cond = wait_until(degraded, within=60, what="the policy to report the denied write")
        assert cond["reason"] == "LabelWriteFailed"
        assert made.name in cond["message"]
        assert GUARD in cond["message"]
        assert "metadata.labels[gpus.example.com/gpu-model]" in cond["message"]
        labels = _get(cluster, "node", made.name)["metadata"]["labels"]
        assert not [k for k in labels if k.startswith("gpus.example.com/")]
    finally:
        pool.cleanup()
