"""B3's floors: policies of constants, for what the apiserver's policy machinery costs
whatever a policy's CEL decides.

- the floor policy sets the scheduler the compiled policy sets (so the same scheduler
  profile sees the pods) and nothing else: the least a hinting policy can do;
- the output policy writes, with no condition, what the webhook's own decision
  (hints.decide) writes into the bench pod: the least any policy that leaves the pod as the
  compiled policy leaves it can cost. Between it and the compiled policy is what the
  compiled CEL's deciding costs; between the floor and it, what adding those values costs.
"""

from __future__ import annotations

from typing import Any

from bench import fleet
from bench.admission.load import NAMESPACE, bench_policy
from schedpolicy.core.api import SchedulingPolicySpec
from schedpolicy.core.placement import hints
from schedpolicy.core.placement.cel import cel_string, cel_value
from schedpolicy.core.policy.matching import Policy

FLOOR = "schedpolicy-bench-floor"
OUTPUT = "schedpolicy-bench-output"
# Both constant policies carry it, and lanes remove them by it.
BENCH_LABEL = "schedpolicy.io/bench"


def cost_pod() -> dict[str, Any]:
    """The pod the policy-cost lanes create, as they send it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "cost-", "labels": {"app": "load"}},
        "spec": {"containers": [{"name": "c", "image": fleet.PAUSE}]},
    }


def floor_policy(scheduler: str) -> list[dict[str, Any]]:
    patch = f"[JSONPatch{{op: 'add', path: '/spec/schedulerName', value: {cel_string(scheduler)}}}]"
    return _constant_policy(FLOOR, "floor", patch)


def output_policy() -> list[dict[str, Any]]:
    """The webhook's patch for cost_pod() under the bench policy, as constant operations."""
    body = bench_policy()
    policy = Policy(
        body["metadata"]["name"], SchedulingPolicySpec.model_validate(body["spec"]), uid=""
    )
    pod = cost_pod()
    ops = hints.decide(policy, pod).json_patch(pod)
    patch = (
        "["
        + ", ".join(
            f"JSONPatch{{op: {cel_string(op['op'])}, path: {cel_string(op['path'])},"
            f" value: {cel_value(op['value'])}}}"
            for op in ops
        )
        + "]"
    )
    return _constant_policy(OUTPUT, "output", patch)


def _constant_policy(name: str, kind: str, patch: str) -> list[dict[str, Any]]:
    meta = {"name": name, "labels": {BENCH_LABEL: kind}}
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
            "spec": {"policyName": name},
        },
    ]
