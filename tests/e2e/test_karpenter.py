"""schedpolicy beside a real Karpenter (v1.15, its KWOK cloud provider).

The cluster here has no fixed nodes: Karpenter launches every node from the NodePools the
harness gives it, the KWOK controller runs them, and Karpenter consolidates them. The
controller, the webhook and the chart's scheduler run as in the other e2e tests. What is
asserted is what the apiserver stored and what Karpenter and the ReplicaSet controller did.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import LocalCluster, audit, binaries
from localcluster.binaries import REPO
from localcluster.karpenter import (
    CAPACITY_TYPE,
    NODEPOOL_LABEL,
    KarpenterOptions,
)
from localcluster.operator_process import OperatorProcess, running
from localcluster.webhook import LoopbackWebhook
from schedpolicy.core.wellknown import COST_ANNOTATION, KARPENTER_COST_ANNOTATION
from tests.e2e import kubeobjects
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import apply, get_json, namespace_policy

pytestmark = pytest.mark.e2e
WORKDIR = REPO / ".cluster" / "pytest-karpenter"
SCHEDULER = "schedpolicy-scheduler"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"
KARPENTER_USER = "karpenter"
# Spot pods go first, for the ReplicaSet controller and for Karpenter alike.
SPOT_FIRST = {
    "signals": [{"type": "CapacityType", "capacityType": {"spot": -500, "onDemand": 0}}],
    "karpenterDisruptionCost": {},
}


@pytest.fixture(scope="module")
def kcluster() -> Iterator[LocalCluster]:
    """A cluster of Karpenter's nodes only, with the operator's two processes running."""
    if binaries.lane():
        pytest.skip("Karpenter runs against the target Kubernetes only")
    cluster = LocalCluster(WORKDIR)
    cluster.up(nodes=[], karpenter_options=KarpenterOptions())
    try:
        cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            "crd/schedulingpolicies.schedpolicy.io",
        )  # fmt: skip
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="module")
def processes(
    kcluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    webhook = LoopbackWebhook(kcluster, tmp_path_factory.mktemp("pki"), "schedpolicy-karpenter")
    with running(kcluster, "--verbose") as proc:
        hook = webhook.start(kcluster.workdir / "logs" / "schedpolicy-webhook.log", "--verbose")
        webhook.register()
        try:
            yield proc
        finally:
            webhook.unregister()
            hook.stop()


@pytest.fixture
def ns(kcluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"k-{request.node.name.lower().replace('_', '-')[:30].strip('-')}-{uuid.uuid4().hex[:4]}"
    kcluster.kubectl("create", "namespace", name)
    wait_until(
        lambda: kcluster.kubectl("get", "sa", "default", "-n", name, check=False),
        what=f"serviceaccount {name}/default",
    )
    yield name
    kcluster.kubectl("delete", "namespace", name, "--wait=false")
    for policy in json.loads(kcluster.kubectl("get", "schedulingpolicies", "-o", "json"))["items"]:
        if name in policy["metadata"]["name"]:
            kcluster.kubectl("delete", "schedulingpolicy", policy["metadata"]["name"])


def deployment(
    name: str,
    replicas: int,
    *,
    cpu: str = "1500m",
    gpus: int = 0,
    node_selector: dict[str, str] | None = None,
    spread_over: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """kubeobjects' Deployment, with memory asked for (Karpenter sizes nodes by it too), GPUs,
    a spread over `spread_over` and pod annotations."""
    doc = kubeobjects.deployment(name, replicas, node_selector=node_selector, cpu=cpu)
    template = doc["spec"]["template"]
    resources = template["spec"]["containers"][0]["resources"]
    resources["requests"]["memory"] = "256Mi"
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if spread_over:
        template["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": spread_over,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": name}},
            }
        ]
    template["metadata"]["annotations"] = annotations or {}
    return doc


def pods(cluster: LocalCluster, ns: str, app: str) -> list[dict[str, Any]]:
    listed = get_json(cluster, "pods", "-n", ns, "-l", f"app={app}")["items"]
    return [p for p in listed if not p["metadata"].get("deletionTimestamp")]


def running_pods(cluster: LocalCluster, ns: str, app: str, count: int) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        found = pods(cluster, ns, app)
        up = [p for p in found if p["status"].get("phase") == "Running"]
        return up if len(found) == count and len(up) == count else None

    return wait_until(probe, within=120, what=f"{count} running pods of {app}")


def node_claims(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    """NodeClaims by the node they launched."""
    listed = get_json(cluster, "nodeclaims")["items"]
    return {c["status"]["nodeName"]: c for c in listed if c.get("status", {}).get("nodeName")}


def nodes(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in get_json(cluster, "nodes")["items"]}


def annotation(pod: dict[str, Any], key: str) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(key)


def test_a_scale_down_by_our_costs_empties_spot_nodes_and_karpenter_removes_exactly_those(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    # Two pods fit on a c5.xlarge (3.9 CPUs once Karpenter's overhead is taken); the spread
    # over capacity types makes Karpenter launch spot and on-demand nodes alike. The pods
    # may not be disrupted, so the only nodes Karpenter can remove are the ones the
    # ReplicaSet controller empties.
    apply(kcluster, namespace_policy(f"spot-first-{ns}", ns, deletionCost=SPOT_FIRST))
    doc = deployment(
        "app",
        4,
        node_selector={INSTANCE_TYPE: "c5.xlarge", NODEPOOL_LABEL: "cpu"},
        spread_over=CAPACITY_TYPE,
        annotations={"karpenter.sh/do-not-disrupt": "true"},
    )
    kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[doc])
    running_pods(kcluster, ns, "app", 4)

    def costed() -> list[dict[str, Any]] | None:
        found = pods(kcluster, ns, "app")
        labels = {n: v["metadata"]["labels"] for n, v in nodes(kcluster).items()}
        want = {"spot": ("-500", str(500 * 2**19)), "on-demand": ("0", str(1000 * 2**19))}
        ok = all(
            (annotation(p, COST_ANNOTATION), annotation(p, KARPENTER_COST_ANNOTATION))
            == want[labels[p["spec"]["nodeName"]][CAPACITY_TYPE]]
            for p in found
        )
        return found if ok else None

    before = wait_until(costed, within=60, what="both costs on every pod")
    node_of = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in before}
    capacity = {
        n: nodes(kcluster)[n]["metadata"]["labels"][CAPACITY_TYPE] for n in node_of.values()
    }
    spot_nodes = {n for n, c in capacity.items() if c == "spot"}
    on_demand_nodes = set(capacity) - spot_nodes
    assert spot_nodes
    assert on_demand_nodes
    claims = node_claims(kcluster)
    spot_claims = {claims[n]["metadata"]["name"] for n in spot_nodes}

    kcluster.kubectl("scale", "-n", ns, "deployment/app", "--replicas=2")
    survivors = running_pods(kcluster, ns, "app", 2)

    # The ReplicaSet controller deleted the spot pods, as their costs said.
    assert {capacity[p["spec"]["nodeName"]] for p in survivors} == {"on-demand"}

    def spot_claims_gone() -> bool:
        left = {c["metadata"]["name"] for c in get_json(kcluster, "nodeclaims")["items"]}
        return not (spot_claims & left)

    wait_until(spot_claims_gone, within=120, what=f"Karpenter to delete NodeClaims {spot_claims}")
    kept = node_claims(kcluster)
    assert on_demand_nodes <= set(kept), "Karpenter removed a node that still runs pods"
    deleted = deleted_node_claims(kcluster)
    assert spot_claims <= deleted
    assert not deleted & {kept[n]["metadata"]["name"] for n in on_demand_nodes}


def deleted_node_claims(cluster: LocalCluster) -> set[str]:
    """NodeClaims Karpenter deleted, from the audit log."""
    return {
        e.name
        for e in audit.writes_by(cluster.audit_log, KARPENTER_USER)
        if e.resource == "nodeclaims" and e.verb == "delete" and e.code < 300
    }


# Karpenter v1.15 consolidates the candidate with the highest price / (1 + the sum of its
# pods' disruption costs) first (notes/karpenter-disruption.md). Unweighted, an on-demand
# c5.xlarge (0.170 $/h) goes before a spot one (0.068): on-demand first is its default, and
# a policy confirms it. Spot first needs the on-demand pod's cost above 2.5 times the spot
# one's: the policy's whole range does it (node weights 2 against 10).
ORDER_POLICIES = {
    "spot": {
        "signals": [{"type": "CapacityType", "capacityType": {"spot": -1000, "onDemand": 1000}}],
        "karpenterDisruptionCost": {},
    },
    "on-demand": {
        "signals": [{"type": "CapacityType", "capacityType": {"spot": 1000, "onDemand": -1000}}],
        "karpenterDisruptionCost": {},
    },
}
# `make test` runs each direction once; the acceptance's ten of ten,
# SCHEDPOLICY_CONSOLIDATION_RUNS=10 (README, Deletion cost).
ORDER_RUNS = int(os.environ.get("SCHEDPOLICY_CONSOLIDATION_RUNS", "1"))
# Karpenter keeps a node it nominated for a pending pod out of consolidation this long.
NOMINATION_WINDOW = 10


@pytest.mark.parametrize("run", range(ORDER_RUNS))
@pytest.mark.parametrize("first", ["spot", "on-demand"])
def test_karpenter_consolidates_in_the_order_the_policy_says(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str, first: str, run: int
) -> None:
    """A spot and an on-demand node with one pod each, in a NodePool with no room for a
    third node: Karpenter can remove either and move its pod to the other. Under a
    spot-first policy it removes the spot node; under an on-demand-first one, the on-demand
    node. Consolidation is let loose only once both nodes are its candidates: before, a
    node Karpenter launched for a pending pod, or one not yet consolidatable, is not one,
    and the other would go whatever the costs say."""
    name = f"order-{uuid.uuid4().hex[:6]}"
    apply(kcluster, ordering_pool(name, ["spot"]))
    in_pool = {NODEPOOL_LABEL: name}
    try:
        apply(kcluster, namespace_policy(f"first-{ns}", ns, deletionCost=ORDER_POLICIES[first]))
        spot, on_demand = two_nodes(kcluster, ns, name, in_pool)
        wait_until(
            lambda: all(
                annotation(p, KARPENTER_COST_ANNOTATION)
                for app in ("a", "b")
                for p in pods(kcluster, ns, app)
            ),
            what="Karpenter-visible costs on both pods",
        )
        time.sleep(NOMINATION_WINDOW + 1)
        # Both consolidatable before any may go: consolidateAfter 0 with a budget of none.
        set_disruption(kcluster, name, "0s", "0")
        wait_until(
            lambda: consolidatable(kcluster, {spot, on_demand}),
            within=60,
            what="both NodeClaims Consolidatable",
        )
        set_disruption(kcluster, name, "0s", "100%")
        wait_until(
            lambda: not {spot, on_demand} <= set(nodes(kcluster)),
            within=180,
            what="Karpenter to consolidate one of the two nodes",
        )
        left = set(nodes(kcluster))
        gone, kept = (spot, on_demand) if first == "spot" else (on_demand, spot)
        assert gone not in left, f"Karpenter removed the {first} node last"
        assert kept in left
    finally:
        for app in ("a", "b", "blocker"):
            kcluster.kubectl("delete", "-n", ns, "deployment", app, "--ignore-not-found")
        kcluster.kubectl("delete", "nodepool", name, "--ignore-not-found", "--wait=false")


def two_nodes(
    cluster: LocalCluster, ns: str, pool: str, in_pool: dict[str, str]
) -> tuple[str, str]:
    """`a` on a spot node and `b` on an on-demand node of `pool`, each of which could hold
    both. A blocker fills the spot node while the pool may launch on-demand only, for `b`;
    then the pool takes both capacity types again and the blocker goes."""
    launch(cluster, ns, deployment("a", 1, node_selector=in_pool), "a")
    spot = pods(cluster, ns, "a")[0]["spec"]["nodeName"]
    # KWOK's nodes carry no kubernetes.io/hostname label: pinned by name.
    blocker = deployment("blocker", 1, cpu="2000m")
    blocker["spec"]["template"]["spec"]["affinity"] = on_node(spot)
    launch(cluster, ns, blocker, "blocker")
    capacity_types(cluster, pool, ["on-demand"])
    launch(cluster, ns, deployment("b", 1, node_selector=in_pool), "b")
    on_demand = pods(cluster, ns, "b")[0]["spec"]["nodeName"]
    capacity_types(cluster, pool, ["spot", "on-demand"])
    labels = {n: nodes(cluster)[n]["metadata"]["labels"][CAPACITY_TYPE] for n in (spot, on_demand)}
    assert labels == {spot: "spot", on_demand: "on-demand"}, labels
    cluster.kubectl("delete", "-n", ns, "deployment", "blocker", "--wait=true")
    wait_until(lambda: not pods(cluster, ns, "blocker"), what="the blocker gone")
    return spot, on_demand


def set_disruption(cluster: LocalCluster, pool: str, after: str, budget: str) -> None:
    budgets = [
        {"nodes": budget, "reasons": ["Underutilized", "Empty"]},
        {"nodes": "0", "reasons": ["Drifted"]},
    ]
    patch = {"spec": {"disruption": {"consolidateAfter": after, "budgets": budgets}}}
    cluster.kubectl("patch", "nodepool", pool, "--type=merge", "-p", json.dumps(patch))


def consolidatable(cluster: LocalCluster, names: set[str]) -> bool:
    claims = node_claims(cluster)
    return all(
        any(
            c["type"] == "Consolidatable" and c["status"] == "True"
            for c in claims[n].get("status", {}).get("conditions", [])
        )
        for n in names
        if n in claims
    ) and names <= set(claims)


def capacity_types(cluster: LocalCluster, pool: str, values: list[str]) -> None:
    patch = [
        {
            "op": "replace",
            "path": "/spec/template/spec/requirements/1",
            "value": {"key": CAPACITY_TYPE, "operator": "In", "values": values},
        }
    ]
    cluster.kubectl("patch", "nodepool", pool, "--type=json", "-p", json.dumps(patch))


def launch(cluster: LocalCluster, ns: str, doc: dict[str, Any], app: str) -> None:
    cluster.kubectl("apply", "-n", ns, "-f", "-", objects=[doc])
    running_pods(cluster, ns, app, doc["spec"]["replicas"])


def on_node(name: str) -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def ordering_pool(name: str, capacity: list[str]) -> dict[str, Any]:
    """c5.xlarge only, two at most (a replacement would need a third), no consolidation
    until the test turns it on, and none for drift while the test changes its capacity
    types."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "weight": 90,
            "limits": {"cpu": "8"},
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": INSTANCE_TYPE, "operator": "In", "values": ["c5.xlarge"]},
                        {"key": CAPACITY_TYPE, "operator": "In", "values": capacity},
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "Never",
                "budgets": [
                    {"nodes": "100%", "reasons": ["Underutilized", "Empty"]},
                    {"nodes": "0", "reasons": ["Drifted"]},
                ],
            },
        },
    }


def test_karpenter_launches_gpu_nodes_for_hinted_pods_and_our_labels_land_on_them(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    placement = {
        "schedulerName": SCHEDULER,
        "capacityType": {"prefer": "spot", "weight": 50},
    }
    labels = {"gpu": {"sources": ["GPUFeatureDiscovery", "InstanceType"]}}
    apply(kcluster, namespace_policy(f"gpu-{ns}", ns, placement=placement))
    apply(kcluster, {**namespace_policy(f"labels-{ns}", ns), "spec": {"nodeLabels": labels}})
    kcluster.kubectl(
        "apply", "-n", ns, "-f", "-", objects=[deployment("train", 2, cpu="4", gpus=8)]
    )
    placed = running_pods(kcluster, ns, "train", 2)
    for pod in placed:
        spec = pod["spec"]
        assert spec["schedulerName"] == SCHEDULER, "the webhook did not hint the pod"
        assert annotation(pod, "schedpolicy.io/hints"), "no record of the hints"
    launched = {p["spec"]["nodeName"] for p in placed}
    claims = node_claims(kcluster)
    assert launched <= set(claims), "a GPU pod runs on a node Karpenter did not launch"

    def labelled() -> dict[str, dict[str, str]] | None:
        found = {n: nodes(kcluster)[n]["metadata"]["labels"] for n in launched}
        return found if all(MODEL in v and MEMORY in v for v in found.values()) else None

    found = wait_until(labelled, within=60, what=f"GPU labels on {sorted(launched)}")
    for name, node_labels in found.items():
        instance = node_labels[INSTANCE_TYPE]
        expected = {"g5.48xlarge": ("A10G", "22888"), "p4d.24xlarge": ("A100", "40960")}
        assert (node_labels[MODEL], node_labels[MEMORY]) == expected[instance], name
        assert not any(
            k.startswith("schedpolicy.io/") for k in claims[name]["metadata"].get("labels", {})
        ), "Karpenter itself set our labels"


def test_with_karpenter_writing_the_deletion_cost_the_policy_yields_and_names_it(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    """Karpenter with its PodDeletionCostManagement gate on writes pod-deletion-cost from its
    own ranking. The policy (no takeOver) leaves those pods alone, says who writes them, and
    the two never take the annotation back and forth."""
    seconds = float(os.environ.get("SCHEDPOLICY_COEXIST_SECONDS", "600"))
    kcluster.start_karpenter(KarpenterOptions(feature_gates={"PodDeletionCostManagement": True}))
    try:
        coexist(kcluster, ns, seconds)
    finally:
        kcluster.start_karpenter(KarpenterOptions())


def coexist(kcluster: LocalCluster, ns: str, seconds: float) -> None:
    started = audit.now()
    name = f"spot-first-{ns}"
    apply(kcluster, namespace_policy(name, ns, deletionCost=SPOT_FIRST))
    doc = deployment("web", 6, cpu="1000m", node_selector={NODEPOOL_LABEL: "cpu"})
    kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[doc])
    running_pods(kcluster, ns, "web", 6)

    def karpenter_owns_one() -> bool:
        return any(KARPENTER_USER in cost_managers(p) for p in pods(kcluster, ns, "web"))

    wait_until(karpenter_owns_one, within=150, what="Karpenter's first pod-deletion-cost write")

    def conflicting() -> dict[str, Any] | None:
        policy = get_json(kcluster, "schedulingpolicy", name)
        cond = {c["type"]: c for c in policy.get("status", {}).get("conditions", [])}
        c = cond.get("Conflicting", {})
        ok = c.get("reason") == "ForeignCostWriter" and f"by {KARPENTER_USER}" in c["message"]
        return c if ok else None

    wait_until(conflicting, within=60, what="Conflicting=ForeignCostWriter naming karpenter")
    # Churn for the rest of the window, so that Karpenter ranks again and again and new
    # pods arrive for both writers to see.
    deadline = time.monotonic() + seconds
    replicas = 6
    while time.monotonic() < deadline:
        replicas = 4 if replicas == 6 else 6
        kcluster.kubectl("scale", "-n", ns, "deployment/web", f"--replicas={replicas}")
        time.sleep(min(60.0, max(0.0, deadline - time.monotonic())))
    wars = write_wars(kcluster.audit_log, ns, started)
    assert wars == {}, f"pods whose pod-deletion-cost changed hands more than once: {wars}"
    ours_after = [
        p["metadata"]["name"]
        for p in pods(kcluster, ns, "web")
        if KARPENTER_USER in cost_managers(p) and "schedpolicy" in cost_managers(p)
    ]
    assert ours_after == []


def cost_managers(pod: dict[str, Any]) -> set[str]:
    field = f"f:{COST_ANNOTATION}"
    return {
        e["manager"]
        for e in pod["metadata"].get("managedFields") or []
        if field in (e.get("fieldsV1") or {}).get("f:metadata", {}).get("f:annotations", {})
    }


def write_wars(log: Path, ns: str, since: Any) -> dict[str, list[str]]:
    """Pods whose pod-deletion-cost passed from one writer to another and back, from the
    audit log's patch bodies: the writers in order, for each such pod."""
    writers: dict[str, list[str]] = defaultdict(list)
    for event in audit.events(log):
        if event.namespace != ns or event.resource != "pods" or event.at < since:
            continue
        if (
            event.verb != "patch"
            or event.code >= 300
            or COST_ANNOTATION not in json.dumps(event.request)
        ):
            continue
        who = "schedpolicy" if event.user == audit.OPERATOR_USER else event.user
        if not writers[event.name] or writers[event.name][-1] != who:
            writers[event.name].append(who)
    return {pod: seq for pod, seq in writers.items() if len(seq) > 2}


A100 = {"models": ["A100"], "minMemoryMiB": 40960}


def hinted_when_created(cluster: LocalCluster, ns: str, doc: dict[str, Any]) -> None:
    """Wait until the webhook hints a dry-run pod of `doc`'s template: it answers only once
    its view holds the policy, and a pod created before would go unhinted."""
    template = doc["spec"]["template"]
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", **template["metadata"]},
    }
    probe["spec"] = template["spec"]

    def hinted() -> bool:
        out = cluster.kubectl(
            "create", "-n", ns, "--dry-run=server", "-o", "json", "-f", "-", objects=[probe]
        )
        return bool(annotation(json.loads(out), "schedpolicy.io/hints"))

    wait_until(hinted, within=60, what="the webhook to hint a dry-run pod")


def condition(cluster: LocalCluster, policy: str, kind: str) -> dict[str, Any] | None:
    found = get_json(cluster, "schedulingpolicy", policy).get("status", {}).get("conditions", [])
    return next((c for c in found if c["type"] == kind), None)


def seconds(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def test_a_gpu_model_hint_gets_a_node_karpenter_launches_and_our_labels_follow(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    """On a cluster where Karpenter launches every node, a pod under `placement.gpu: A100`
    runs on a new node of an A100 instance type within Karpenter's launch plus 30 s (not
    Pending for a label no node has yet); our model and memory labels land on that node
    afterwards, and the policy says Provisionable."""
    policy = f"a100-{ns}"
    apply(
        kcluster, namespace_policy(policy, ns, placement={"schedulerName": SCHEDULER, "gpu": A100})
    )
    labels = {"gpu": {"sources": ["InstanceType"]}}
    apply(kcluster, {**namespace_policy(f"labels-{ns}", ns), "spec": {"nodeLabels": labels}})
    # One GPU: unhinted, Karpenter would launch its cheapest GPU type, a 4-GPU A10G g5.
    doc = deployment("serve", 1, cpu="4", gpus=1)
    hinted_when_created(kcluster, ns, doc)
    kcluster.kubectl("apply", "-n", ns, "-f", "-", objects=[doc])
    (pod,) = running_pods(kcluster, ns, "serve", 1)
    name = pod["spec"]["nodeName"]
    node = nodes(kcluster)[name]
    assert node["metadata"]["labels"][INSTANCE_TYPE] == "p4d.24xlarge"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert [[e["key"] for e in t["matchExpressions"]] for t in terms["nodeSelectorTerms"]] == [
        [MODEL, MEMORY],
        [INSTANCE_TYPE, NODEPOOL_LABEL, MODEL],
    ]
    claim = node_claims(kcluster)[name]
    done = {c["type"]: c["lastTransitionTime"] for c in claim["status"]["conditions"]}
    launch = seconds(done["Initialized"]) - seconds(claim["metadata"]["creationTimestamp"])
    scheduled = {c["type"]: c for c in pod["status"]["conditions"]}["PodScheduled"]
    pending = seconds(scheduled["lastTransitionTime"]) - seconds(
        pod["metadata"]["creationTimestamp"]
    )
    assert pending <= launch + 30, (pending, launch)

    def labelled() -> dict[str, str] | None:
        found = nodes(kcluster)[name]["metadata"]["labels"]
        return found if MODEL in found else None

    found = wait_until(labelled, within=60, what=f"our GPU labels on {name}")
    assert (found[MODEL], found[MEMORY]) == ("A100", "40960")
    ready = wait_until(lambda: condition(kcluster, policy, "Provisionable"), what="Provisionable")
    assert (ready["status"], ready["reason"]) == ("True", "InstanceTypesKnown"), ready
    assert "p4d.24xlarge" in ready["message"]


def test_a_gpu_model_no_instance_type_holds_says_so_on_the_policy(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    """A model that no node carries and no instance type of the verified table holds: the
    policy's Provisionable condition is False and `kubectl get spol -o wide` shows why, instead of
    pods Pending with nothing said."""
    policy = f"mi300x-{ns}"
    gpu = {"models": ["MI300X"], "minMemoryMiB": 1024}
    apply(
        kcluster, namespace_policy(policy, ns, placement={"schedulerName": SCHEDULER, "gpu": gpu})
    )

    def refused() -> dict[str, Any] | None:
        found = condition(kcluster, policy, "Provisionable")
        return found if found and found["status"] == "False" else None

    found = wait_until(refused, what="Provisionable=False")
    assert found["reason"] == "NoInstanceType"
    assert "MI300X" in found["message"]
    assert "stay Pending" in found["message"]
    shown = kcluster.kubectl("get", "spol", policy, "--no-headers", "-o", "wide")
    assert "NoInstanceType" in shown, shown
