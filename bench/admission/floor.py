"""B3's floor policy: the least a hinting MutatingAdmissionPolicy can do, for what the
apiserver's policy machinery costs whatever the policy says."""

from __future__ import annotations

from typing import Any

from bench.admission.load import NAMESPACE

FLOOR = "schedpolicy-bench-floor"


def floor_policy(scheduler: str) -> list[dict[str, Any]]:
    """Set the scheduler the compiled policy sets (so the same scheduler profile sees the
    pods) and nothing else. What it costs is the apiserver's machinery, not CEL of ours."""
    meta = {"name": FLOOR, "labels": {"schedpolicy.io/bench": "floor"}}
    patch = f"[JSONPatch{{op: 'add', path: '/spec/schedulerName', value: '{scheduler}'}}]"
    rules = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
        }
    ]
    namespaces = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    spec = {
        "failurePolicy": "Ignore",
        "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": rules, "namespaceSelector": namespaces},
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}],
    }
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": meta,
            "spec": spec,
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": meta,
            "spec": {"policyName": FLOOR},
        },
    ]
