"""GPU pods our webhook hinted get nodes that Karpenter launches for them, and our GPU labels
follow onto those nodes; a GPU model that no instance type holds is said on the policy."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from localcluster import LocalCluster
from localcluster.karpenter import NODEPOOL_LABEL
from localcluster.operator_process import OperatorProcess
from tests.e2e.conftest import MEMORY, MODEL
from tests.e2e.karpenter.conftest import (
    INSTANCE_TYPE,
    annotation,
    claims_of,
    deployment,
    nodes,
    running_pods,
)
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import apply, get_json, namespace_policy

pytestmark = pytest.mark.e2e
SCHEDULER = "schedpolicy-scheduler"


def test_karpenter_launches_gpu_nodes_for_hinted_pods_and_our_labels_land_on_them(
    kcluster: LocalCluster, processes: OperatorProcess, ns: str
) -> None:
    """GPU pods that our webhook hinted to our scheduler run on nodes Karpenter launches for
    them, and our model and memory labels land on those nodes, never on Karpenter's
    NodeClaims."""
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
    # Fails if a GPU pod runs on a node Karpenter did not launch.
    claims = claims_of(kcluster, launched)

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
    claim = claims_of(kcluster, {name})[name]
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
