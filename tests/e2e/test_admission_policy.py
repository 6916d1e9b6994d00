"""Placement hints compiled to MutatingAdmissionPolicy: the same stored pod as the webhook's.

The differential test compiles generated policies with the pure compiler, installs them in
the real apiserver, and compares, pod by pod, what the apiserver stores on each path
(tests/e2e/admission_diff.py). A mismatch is shrunk to a minimal pod and policy set.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from schedpolicy.core.placement import compiler as admission_policy
from tests.e2e import admission_diff as diff

pytestmark = pytest.mark.e2e
PODS = int(os.environ.get("SCHEDPOLICY_DIFF_PODS", "2000"))
POLICIES = int(os.environ.get("SCHEDPOLICY_DIFF_POLICIES", "50"))
HINTS = "schedpolicy.io/hints"
SEED = int(os.environ.get("SCHEDPOLICY_DIFF_SEED", "36"))


def install(cluster: LocalCluster, run: str, compiled: list[admission_policy.Compiled]) -> None:
    """Replace this run's compiled policies with `compiled`."""
    cluster.kubectl(
        "delete",
        "mutatingadmissionpolicies,mutatingadmissionpolicybindings",
        "-l",
        f"schedpolicy.io/diff-run={run}",
        "--ignore-not-found",
        "--wait=true",
    )
    docs: list[dict[str, Any]] = []
    for c in compiled:
        for doc in (c.body, c.binding):
            labelled = json.loads(json.dumps(doc))
            labelled["metadata"]["labels"]["schedpolicy.io/diff-run"] = run
            docs.append(labelled)
    if docs:
        cluster.kubectl("apply", "-f", "-", objects=docs)


def compile_specs(specs: dict[str, dict[str, Any]], plain: str) -> list[admission_policy.Compiled]:
    parsed = [diff.parse(n, s) for n, s in specs.items()]
    outcomes = admission_policy.compile_all(
        parsed, instance_types=diff.INSTANCE_TYPES, excluded_namespaces=[plain]
    )
    refused = {n: o for n, o in outcomes.items() if not isinstance(o, admission_policy.Compiled)}
    assert not refused, refused
    return [o for o in outcomes.values() if isinstance(o, admission_policy.Compiled)]


@pytest.fixture
async def lanes(cluster: LocalCluster, api: client.ApiClient) -> AsyncIterator[diff.Lanes]:
    run = uuid.uuid4().hex[:8]
    rng = random.Random(SEED)
    core = client.CoreV1Api(api)
    plain = f"diff-plain-{run}"
    served = {f"diff-{run}-{i}": diff.namespace_labels(rng, run) for i in range(6)}
    for name, labels in [(plain, {"schedpolicy.io/diff-run": run}), *served.items()]:
        await core.create_namespace({"metadata": {"name": name, "labels": labels}})
    namespaces = {n: {**ls, "kubernetes.io/metadata.name": n} for n, ls in served.items()}
    lanes = diff.Lanes(api, plain, namespaces, diff.StaticInputs(namespaces, []))
    lanes.run = run  # type: ignore[attr-defined]
    try:
        yield lanes
    finally:
        install(cluster, run, [])
        for name in [plain, *served]:
            await core.delete_namespace(name)


async def settled(lanes: diff.Lanes, probe: dict[str, Any], namespace: str, hinted: bool) -> None:
    """The apiserver loads admission policies from its informer: wait until it uses them."""
    for _ in range(100):
        out = await lanes.dry_run(namespace, probe)
        if ("schedpolicy.io/hints" in (out["metadata"].get("annotations") or {})) == hinted:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the apiserver did not load the compiled policies in 20 s")


PROBE_SPEC = {
    "priority": 1_000_000,
    "placement": {"schedulerName": "probe-profile"},
}


def probe_for(run: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A policy selecting only this run's probe pod, and that pod."""
    spec = {
        **PROBE_SPEC,
        "podSelector": {"matchLabels": {"probe": run}},
        "namespaceSelector": {"matchLabels": {"schedpolicy.io/diff-run": run}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "labels": {"probe": run}},
        "spec": {
            "containers": [{"name": "c", "image": "pause"}],
            "automountServiceAccountToken": False,
        },
    }
    return spec, pod


async def test_compiled_policies_store_the_same_pod_as_the_webhook(
    cluster: LocalCluster, lanes: diff.Lanes
) -> None:
    """Over 2000 generated pods and 50 generated policies, the apiserver stores the same pod
    whether the compiled MutatingAdmissionPolicies or the webhook hinted it, and the pods
    exercise every kind of hint; a mismatch fails naming a shrunk pod and policy set."""
    run: str = lanes.run  # type: ignore[attr-defined]
    rng = random.Random(SEED + 1)
    specs = {f"diff-{run}-{i:02d}": diff.policy_spec(rng, run) for i in range(POLICIES)}
    probe_ns = next(iter(lanes.served))
    # A probe policy of its own selects only the probe pod, and tells when policies load.
    probe_spec, probe = probe_for(run)
    everything = {**specs, f"diff-{run}-probe": probe_spec}
    compiled = compile_specs(everything, lanes.plain)
    lanes.inputs.parsed = [diff.parse(n, s) for n, s in everything.items()]
    install(cluster, run, compiled)
    await settled(lanes, probe, probe_ns, hinted=True)

    pods = [
        (diff.generated_pod(rng, f"p{i}"), rng.choice(sorted(lanes.served))) for i in range(PODS)
    ]
    results = await asyncio.gather(*(lanes.pair(pod, ns) for pod, ns in pods))
    failures = [(pod, ns, r) for (pod, ns), r in zip(pods, results, strict=True) if r[0] != r[1]]
    # The comparison means something only if the generated cases exercise every hint.
    injected = Counter(
        kind
        for _, stored in results
        for kind in json.loads(
            (stored["metadata"].get("annotations") or {}).get(HINTS, '{"injected": []}')
        )["injected"]
    )
    print(f"{PODS} pods, {len(specs)} policies, injected {dict(injected)}, {lanes.calls} calls")
    assert set(injected) == {"schedulerName", "gpuAffinity", "preferredAffinity", "zoneSpread"}
    assert min(injected.values()) >= PODS // 50, injected
    unhinted = sum(
        1 for _, stored in results if HINTS not in (stored["metadata"].get("annotations") or {})
    )
    assert PODS // 10 <= unhinted <= PODS // 2, unhinted
    if not failures:
        return
    pod, ns, (webhook_side, policy_side) = failures[0]
    shrinker = Shrinker(cluster, lanes, specs, probe_spec, probe, probe_ns)
    shrinker.namespace = ns
    small_pod, small_specs = await diff.shrink(pod, specs, shrinker.still_fails)
    final = await lanes.mismatch(small_pod, ns)
    pytest.fail(
        f"{len(failures)} of {PODS} pods differ. Shrunk to:\npod: {json.dumps(small_pod)}\n"
        f"namespace labels: {lanes.served[ns]}\npolicies: {json.dumps(small_specs)}\n"
        f"webhook path: {json.dumps(final[0] if final else webhook_side)}\n"
        f"policy path:  {json.dumps(final[1] if final else policy_side)}"
    )


class Shrinker:
    """`still_fails` for diff.shrink: reinstalls the compiled policies when the set under
    test changes (with the probe policy, which tells when the apiserver has loaded them),
    then asks whether the pod's two paths still differ."""

    def __init__(
        self,
        cluster: LocalCluster,
        lanes: diff.Lanes,
        specs: dict[str, dict[str, Any]],
        probe_spec: dict[str, Any],
        probe: dict[str, Any],
        probe_ns: str,
        compile_fn: Any = None,
    ) -> None:
        self.cluster, self.lanes, self.now = cluster, lanes, specs
        self.probe_spec, self.probe, self.probe_ns = probe_spec, probe, probe_ns
        self.compile = compile_fn or compile_specs
        self.run: str = lanes.run  # type: ignore[attr-defined]
        self.namespace = ""

    async def still_fails(self, pod: dict[str, Any], specs: dict[str, dict[str, Any]]) -> bool:
        if specs is not self.now:
            everything = {**specs, f"diff-{self.run}-probe": self.probe_spec}
            install(self.cluster, self.run, self.compile(everything, self.lanes.plain))
            self.lanes.inputs.parsed = [diff.parse(n, v) for n, v in everything.items()]
            self.now = specs
            await asyncio.sleep(2)
            await settled(self.lanes, self.probe, self.probe_ns, hinted=True)
        return await self.lanes.mismatch(pod, self.namespace or self.probe_ns) is not None


async def test_a_wrong_compile_is_shrunk_to_two_policies_and_one_pod(
    cluster: LocalCluster, lanes: diff.Lanes
) -> None:
    """The shrinker, checked on a compiler made wrong on purpose (a zone spread one skew
    wider than the webhook's): the mismatch it finds among generated policies and pods is
    shrunk to at most two policies and one pod, which still differ."""
    run: str = lanes.run  # type: ignore[attr-defined]

    def wrong(specs: dict[str, dict[str, Any]], plain: str) -> list[admission_policy.Compiled]:
        out = []
        for c in compile_specs(specs, plain):
            text = re.sub(
                r"maxSkew: (\d+),", lambda m: f"maxSkew: {int(m[1]) + 1},", json.dumps(c.body)
            )
            body = json.loads(text)
            out.append(dataclasses.replace(c, body=body))
        return out

    rng = random.Random(SEED + 2)
    specs = {f"diff-{run}-{i:02d}": diff.policy_spec(rng, run) for i in range(12)}
    probe_spec, probe = probe_for(run)
    probe_ns = next(iter(lanes.served))
    everything = {**specs, f"diff-{run}-probe": probe_spec}
    install(cluster, run, wrong(everything, lanes.plain))
    lanes.inputs.parsed = [diff.parse(n, s) for n, s in everything.items()]
    await settled(lanes, probe, probe_ns, hinted=True)
    found = None
    for i in range(400):
        pod, ns = diff.generated_pod(rng, f"w{i}"), rng.choice(sorted(lanes.served))
        if await lanes.mismatch(pod, ns) is not None:
            found = (pod, ns)
            break
    assert found is not None, "the wrong compile was never caught"
    shrinker = Shrinker(cluster, lanes, specs, probe_spec, probe, probe_ns, wrong)
    shrinker.namespace = found[1]
    small_pod, small_specs = await diff.shrink(found[0], specs, shrinker.still_fails)
    assert len(small_specs) <= 2, small_specs
    assert await shrinker.still_fails(small_pod, small_specs)
    assert len(json.dumps(small_pod)) <= len(json.dumps(found[0]))


def evaluations(cluster: LocalCluster, name: str) -> float:
    """How often the apiserver has evaluated the admission policy `name`, by its metric."""
    prefix = "apiserver_mutating_admission_policy_check_duration_seconds_count{"
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in cluster.kubectl("get", "--raw", "/metrics").splitlines()
        if line.startswith(prefix) and f'policy="{name}"' in line
    )


async def test_a_compiled_policy_runs_once_per_create(
    cluster: LocalCluster, lanes: diff.Lanes
) -> None:
    """A compiled policy is evaluated once per pod create, as the apiserver's own metric
    counts: its own patch does not make it run again."""
    # Its own patch must not make the apiserver run it again (reinvocationPolicy: Never):
    # a second run adds nothing and doubles the CEL's cost on every create.
    run: str = lanes.run  # type: ignore[attr-defined]
    namespace = next(iter(lanes.served))
    spec, probe = probe_for(run)
    [compiled] = compile_specs({f"once-{run}": spec}, lanes.plain)
    install(cluster, run, [compiled])
    await settled(lanes, probe, namespace, hinted=True)
    before = evaluations(cluster, compiled.name)
    creates = 20
    for _ in range(creates):
        out = await lanes.dry_run(namespace, probe)
        assert out["spec"]["schedulerName"] == "probe-profile"
    assert evaluations(cluster, compiled.name) - before == creates


GEN, TYPE, POOL = (
    "example.com/generation",
    "node.kubernetes.io/instance-type",
    "karpenter.sh/nodepool",
)
MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"


def _term(*exprs: tuple[str, str, list[str]], fields: str = "") -> dict[str, Any]:
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = [
            {"key": k, "operator": op, **({"values": vs} if vs else {})} for k, op, vs in exprs
        ]
    if fields:
        term["matchFields"] = [
            {"key": "metadata.name", "operator": op, "values": ["n1"]} for op in fields.split()
        ]
    return term


# name: (the pod's own required terms (None: no affinity), its nodeSelector, how many
# terms it is stored with; None: the GPU affinity is not added). The policy asks for an
# H100 of 40960 MiB, which the verified table has on p5.48xlarge and p5.4xlarge.
DEAD_TERM_CASES: dict[str, tuple[list[dict[str, Any]] | None, dict[str, str], int | None]] = {
    "fresh": (None, {}, 2),
    "p4d-only": ([_term((TYPE, "In", ["p4d.24xlarge"]))], {}, 1),
    "intersected": ([_term((TYPE, "In", ["p4d.24xlarge", "p5.48xlarge"]))], {}, 2),
    "notin-every-type": ([_term((TYPE, "NotIn", ["p5.48xlarge", "p5.4xlarge"]))], {}, 1),
    "off-karpenter": ([_term((POOL, "DoesNotExist", []))], {}, 1),
    "empty-own-term": ([{}, _term(("zone-x", "In", ["a"]))], {}, 2),
    "own-term-dead": ([_term(("zone-x", "In", ["a"]), ("zone-x", "In", ["b"]))], {}, None),
    "gt-not-an-integer": ([_term((GEN, "Gt", ["abc"]))], {}, None),
    "gt-lt-adjacent": ([_term((GEN, "Gt", ["1"]), (GEN, "Lt", ["2"]))], {}, None),
    "gt-lt-alive": ([_term((GEN, "Gt", ["007"]), (GEN, "Lt", ["9"]))], {}, 2),
    "fields-contradict": ([_term(fields="In NotIn")], {}, None),
    "selector-p4d": (None, {TYPE: "p4d.24xlarge"}, 1),
    "selector-other-model": (None, {MODEL: "A100"}, None),
    "selector-accepted-model": ([_term(("zone-x", "Exists", []))], {MODEL: "H100"}, 1),
    "selector-low-memory": (None, {MEMORY: "24576"}, 1),
    "selector-p4d-with-terms": ([_term(("zone-x", "NotIn", ["a"]))], {TYPE: "p4d.24xlarge"}, 1),
}


async def test_terms_that_can_match_no_node_are_left_out_on_both_paths(
    cluster: LocalCluster, lanes: diff.Lanes
) -> None:
    """Pods whose own terms or nodeSelector leave some of the GPU alternatives (or all of
    them) matching no node: the compiled policy stores what the webhook stores, In lists
    intersected, dead terms left out, and a pod none of whose terms could live keeps its
    own affinity (node_terms.py)."""
    run: str = lanes.run  # type: ignore[attr-defined]
    namespace = next(iter(lanes.served))
    spec = {
        "namespaceSelector": {"matchLabels": {"schedpolicy.io/diff-run": run}},
        "podSelector": {"matchLabels": {"app": "dead-terms"}},
        "placement": {
            "gpu": {"models": ["H100"], "minMemoryMiB": 40960},
            "capacityType": {"prefer": "spot"},
        },
    }
    probe_spec, probe = probe_for(run)
    everything = {f"dead-{run}": spec, f"dead-{run}-probe": probe_spec}
    install(cluster, run, compile_specs(everything, lanes.plain))
    lanes.inputs.parsed = [diff.parse(n, s) for n, s in everything.items()]
    await settled(lanes, probe, namespace, hinted=True)
    for name, (terms, selector, count) in DEAD_TERM_CASES.items():
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "dead-terms"}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "pause",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
                "automountServiceAccountToken": False,
            },
        }
        if terms is not None:
            body["spec"]["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        if selector:
            body["spec"]["nodeSelector"] = selector
        webhook_side, policy_side = await lanes.pair(body, namespace)
        assert webhook_side == policy_side, f"{name}: {webhook_side} != {policy_side}"
        record = json.loads(policy_side["metadata"]["annotations"][HINTS])
        required = (
            (policy_side["spec"].get("affinity") or {})
            .get("nodeAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        )
        if count is None:
            assert "gpuAffinity" not in record["injected"], name
            assert required.get("nodeSelectorTerms") == terms, name
        else:
            assert "gpuAffinity" in record["injected"], name
            assert len(required["nodeSelectorTerms"]) == count, (name, required)
