"""GPU placement hints: a policy's pods get our scheduler and a required node affinity for the
GPU models and memory it asks for, merged with the affinity the pods bring themselves."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from tests.e2e.conftest import MEMORY, MODEL
from tests.e2e.kubeobjects import scheduled_by, wait_until
from tests.e2e.placement.conftest import (
    HINTS,
    SCHEDULER,
    CreatePod,
    bound,
    gpu_pod,
    settled,
)
from tests.e2e.pools import Pool, apply, get_json, namespace_policy

pytestmark = pytest.mark.e2e


def label_nodes_policy(name: str, pool: Pool) -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "priority": 600,
            "nodeLabels": {
                "gpu": {
                    "sources": ["GPUFeatureDiscovery", "InstanceType"],
                    "nodeSelector": {"matchLabels": pool.selector},
                }
            },
        },
    }


def gpu_nodes(pool: Pool) -> dict[str, Any]:
    return {
        "p4de": pool.node("p4de", instance_type="p4de.24xlarge", gpus="8", cpu="96", pods="100"),
        "p5": pool.node("p5", instance_type="p5.48xlarge", gpus="8", cpu="192", pods="100"),
        "g5": pool.node("g5", instance_type="g5.12xlarge", gpus="4", cpu="48", pods="100"),
        "p4d": pool.node("p4d", instance_type="p4d.24xlarge", gpus="8", cpu="96", pods="100"),
    }


async def labelled(cluster: LocalCluster, names: list[str]) -> None:
    def done() -> bool:
        return all(MODEL in get_json(cluster, "node", n)["metadata"]["labels"] for n in names)

    await asyncio.to_thread(wait_until, done, within=30, what="GPU labels on the pool")


async def gpu_policy_over_labelled_nodes(
    cluster: LocalCluster,
    namespace: str,
    pool: Pool,
    policies: list[str],
    mode: str,
    name: str,
    min_memory: int,
) -> dict[str, Any]:
    """The pool's four GPU nodes, labelled by a policy of their own, and the policy `name`
    over the namespace, asking for an A100 or H100 of `min_memory` MiB or more, once the path
    under test serves it."""
    nodes = gpu_nodes(pool)
    pool.create(*nodes.values())
    policies.extend([f"labels-{pool.tag}", name])
    apply(cluster, label_nodes_policy(f"labels-{pool.tag}", pool))
    apply(
        cluster,
        namespace_policy(
            name,
            namespace,
            placement={"gpu": {"models": ["A100", "H100"], "minMemoryMiB": min_memory}},
        ),
    )
    await labelled(cluster, [n.name for n in nodes.values()])
    await settled(cluster, policies[-1], mode)
    return nodes


@pytest.mark.compat
async def test_gpu_pod_is_hinted_and_placed_by_our_scheduler(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """A policy asking for an A100 or H100 over 40 GiB: its pods get our scheduler and the
    GPU requirements, as the hints annotation records, and run on the p4de and p5 nodes
    only, bound by our scheduler as their Scheduled Events say."""
    nodes = await gpu_policy_over_labelled_nodes(
        cluster, namespace, pool, policies, mode, f"train-{namespace}", 40961
    )

    for i in range(4):
        await create_pod(namespace, gpu_pod(f"train-{i}", pool))
    pods = await bound(api, namespace, "app=gpu", 4)

    for pod in pods:
        assert pod.spec.scheduler_name == SCHEDULER
        assert pod.spec.node_name in {nodes["p4de"].name, nodes["p5"].name}
        record = json.loads(pod.metadata.annotations[HINTS])
        assert record["policy"] == f"train-{namespace}"
        assert set(record["injected"]) >= {"schedulerName", "gpuAffinity"}
    reporters = await scheduled_by(api, namespace, [p.metadata.name for p in pods])
    assert set(reporters.values()) == {SCHEDULER}


@pytest.mark.compat
async def test_existing_terms_are_each_anded_with_gpu_requirements(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """A pod that brings its own required node affinity keeps each of its terms, each one
    ANDed with the policy's GPU requirements (and again with the instance types Karpenter
    could launch), so it runs where both hold: on the p5, not the g5 it also named. Where
    the pod's own term and the launch term both list instance types, the pod's list keeps
    the types both name; a product that can match no node (g5 against the A100 and H100
    types) is left out."""
    nodes = await gpu_policy_over_labelled_nodes(
        cluster, namespace, pool, policies, mode, f"terms-{namespace}", 40960
    )
    instance_type = "node.kubernetes.io/instance-type"

    def own(key: str, *values: str) -> dict[str, Any]:
        return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}

    own_terms = [
        own("kubernetes.io/hostname", nodes["g5"].name),
        own(instance_type, "p5.48xlarge", "g5.12xlarge"),
        own(instance_type, "g5.12xlarge"),
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": own_terms}
        }
    }
    body = gpu_pod("terms", pool, affinity=affinity)
    await create_pod(namespace, body)
    (pod,) = await bound(api, namespace, "app=gpu", 1)

    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    stored = [
        [(e.key, e.values) for e in t.match_expressions] for t in required.node_selector_terms
    ]
    label = [(MODEL, ["A100", "H100"]), (MEMORY, ["40959"])]
    launch_rest = [("karpenter.sh/nodepool", None), (MODEL, None)]
    types = ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5.4xlarge"]
    hostname = ("kubernetes.io/hostname", [nodes["g5"].name])
    # Each own term with the label requirements, then each again with the instance types
    # Karpenter could launch (on nodes of a NodePool only, which these fake nodes are not):
    # the p5-or-g5 term narrowed to p5, the g5 term left out (it shares no type).
    assert stored == [
        [hostname, *label],
        [(instance_type, ["p5.48xlarge", "g5.12xlarge"]), *label],
        [(instance_type, ["g5.12xlarge"]), *label],
        [hostname, (instance_type, types), *launch_rest],
        [(instance_type, ["p5.48xlarge"]), *launch_rest],
    ]
    # The g5 terms can no longer match (A10G), so only the p5 term places the pod.
    assert pod.spec.node_name == nodes["p5"].name
