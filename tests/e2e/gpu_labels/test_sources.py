"""GPU node labels from verified sources, the EC2 instance table and GPU Feature Discovery,
on KWOK nodes: on a test's own pool and on the topology file's GPU nodes, and the real scheduler
placing pods by them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess
from tests.e2e.conftest import (
    GFD_MEMORY,
    MEMORY,
    MODEL,
    PRODUCT,
    SOURCE,
    gpu_node,
    label_policy,
    node_state,
)
from tests.e2e.kubeobjects import PAUSE_IMAGE, eventually, wait_until
from tests.e2e.pools import POOL_LABEL, Pool, apply, get_json

pytestmark = pytest.mark.e2e


@pytest.mark.compat
async def test_gpu_labels_from_verified_sources(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
) -> None:
    """GPU labels from the EC2 table or GPU Feature Discovery, whichever the policy puts
    first: each GPU node gets its model and per-GPU memory, a node without allocatable GPUs
    gets none, and an admin's own model label is left alone and shown as a LabelConflict on
    the policy and the node. A restart rewrites nothing, the scheduler places pods by the
    labels, and deleting the policies removes exactly our labels."""
    nodes = {
        "p4d": gpu_node(pool, "p4d", "p4d.24xlarge", "8", "table"),
        "p4de": gpu_node(
            pool,
            "p4de",
            "p4de.24xlarge",
            "8",
            "table",
            **{PRODUCT: "NVIDIA-A100-SXM4-80GB", GFD_MEMORY: "81920"},
        ),
        "g5": gpu_node(
            pool, "g5", "g5.12xlarge", "4", "table", **{PRODUCT: "NVIDIA-A10G", GFD_MEMORY: "23028"}
        ),
        "p5": gpu_node(
            pool,
            "p5",
            "p5.48xlarge",
            "8",
            "gfd",
            **{PRODUCT: "NVIDIA-H100-80GB-HBM3", GFD_MEMORY: "81559"},
        ),
        "broken": gpu_node(
            pool,
            "broken",
            "g5.12xlarge",
            "0",
            "gfd",
            **{PRODUCT: "NVIDIA-A10G", GFD_MEMORY: "23028"},
        ),
        "custom": gpu_node(pool, "custom", "p4d.24xlarge", "8", "table", **{MODEL: "custom"}),
    }
    pool.create(*nodes.values())
    name = {k: n.name for k, n in nodes.items()}
    policies.extend([f"table-{pool.tag}", f"gfd-{pool.tag}"])
    apply(
        cluster,
        label_policy(f"table-{pool.tag}", pool, "table", ["InstanceType", "GPUFeatureDiscovery"]),
    )
    apply(
        cluster,
        label_policy(f"gfd-{pool.tag}", pool, "gfd", ["GPUFeatureDiscovery", "InstanceType"]),
    )

    expected = {
        "p4d": {MODEL: "A100", MEMORY: "40960"},
        "p4de": {MODEL: "A100", MEMORY: "81920"},
        "g5": {MODEL: "A10G", MEMORY: "22888"},
        "p5": {MODEL: "H100", MEMORY: "81559"},
        "broken": {},
        "custom": {MODEL: "custom", MEMORY: "40960"},
    }

    def labelled() -> dict[str, Any] | None:
        states = {k: node_state(cluster, n) for k, n in name.items()}
        return states if all(states[k]["labels"] == v for k, v in expected.items()) else None

    states = wait_until(labelled, within=60, what="GPU labels on every pool node")

    # Ownership: we list exactly the keys we set; the admin's gpu-model on `custom` is not ours.
    assert states["p4d"]["owned"] == f"{MEMORY},{MODEL}"
    assert states["custom"]["owned"] == MEMORY
    assert states["broken"]["owned"] is None

    # The conflict is reported on the node and in the policy's status.
    def conflict_reported() -> dict[str, Any] | None:
        status = get_json(cluster, "spol", f"table-{pool.tag}").get("status", {})
        degraded = {c["type"]: c for c in status.get("conditions", [])}.get("Degraded", {})
        # The count follows the watch's echo of the labels, which may come a pass later.
        counted = status.get("labeledNodes") == 3  # p4d, p4de, g5; custom's model is not ours
        return (
            status
            if degraded.get("reason") == "LabelConflict"
            and name["custom"] in degraded["message"]
            and counted
            else None
        )

    wait_until(
        conflict_reported, within=30, what="Degraded=LabelConflict and 3 labelled nodes in status"
    )
    events = wait_until(
        lambda: get_json(
            cluster,
            "events",
            "-n",
            "default",
            "--field-selector",
            f"involvedObject.name={name['custom']},reason=LabelConflict",
        )["items"],
        within=30,
        what="a LabelConflict Event on the node",
    )
    assert "custom" in events[0]["message"]

    # A restart writes nothing to any node: labels, annotation and our managedFields entry,
    # timestamp included, stay as they are.
    await asyncio.sleep(2)
    before = {k: node_state(cluster, n) for k, n in name.items()}
    restarted_at = datetime.now(UTC)
    operator.restart()
    operator.wait_for_log("view synced")
    await asyncio.sleep(5)
    assert {k: node_state(cluster, n) for k, n in name.items()} == before
    assert [
        e for e in writes_by(cluster.audit_log, since=restarted_at) if e.resource == "nodes"
    ] == []

    # The real scheduler places by these labels: "> 40 GiB A100 or H100" fits p4de and p5 only.
    await place_and_check(api, namespace, pool.selector, "Gt", "40960", {name["p4de"], name["p5"]})

    # Deleting the policies removes exactly our labels, and the annotation.
    for policy in policies:
        cluster.kubectl("delete", "spol", policy)

    def cleaned() -> dict[str, Any] | None:
        states = {k: node_state(cluster, n) for k, n in name.items()}
        done = all(s["owned"] is None for s in states.values())
        return (
            states
            if done
            and all(
                s["labels"] == ({MODEL: "custom"} if k == "custom" else {})
                for k, s in states.items()
            )
            else None
        )

    wait_until(cleaned, within=30, what="our labels removed")
    p5 = get_json(cluster, "node", name["p5"])["metadata"]["labels"]
    assert p5[PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert p5[SOURCE] == "gfd"


async def place_and_check(
    api: client.ApiClient,
    namespace: str,
    selector: dict[str, str],
    op: str,
    memory: str,
    allowed: set[str],
) -> None:
    core = client.CoreV1Api(api)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": MODEL, "operator": "In", "values": ["A100", "H100"]},
                            {"key": MEMORY, "operator": op, "values": [memory]},
                        ]
                    }
                ]
            }
        }
    }
    names = [f"train-{i}" for i in range(6)]
    for pod_name in names:
        await core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": pod_name, "labels": {"app": "train"}},
                "spec": {
                    "nodeSelector": selector,
                    "affinity": affinity,
                    "containers": [
                        {
                            "name": "c",
                            "image": PAUSE_IMAGE,
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        )

    async def bound() -> list[str] | None:
        pods = (await core.list_namespaced_pod(namespace, label_selector="app=train")).items
        placed = [p.spec.node_name for p in pods if p.spec.node_name]
        return placed if len(placed) == len(names) else None

    placed = await eventually(bound, what="the training pods to be bound")
    assert set(placed) <= allowed, placed
    assert len(set(placed)) >= 1


# ---- the topology file's own GPU nodes ------------------------------------------------------

TOPOLOGY_GPU_NODES = ("gpu-a-g5", "gpu-b-p4d", "gpu-c-p4de", "gpu-a-p5", "gpu-b-broken")


def topology_policy(sources: list[str]) -> dict[str, Any]:
    """Labels the GPU instance types of the topology file, and no test pool's nodes."""
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "topology-gpus"},
        "spec": {
            "priority": 500,
            "nodeLabels": {
                "gpu": {
                    "sources": sources,
                    "nodeSelector": {
                        "matchExpressions": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": [
                                    "g5.12xlarge",
                                    "p4d.24xlarge",
                                    "p4de.24xlarge",
                                    "p5.48xlarge",
                                ],
                            },
                            {"key": POOL_LABEL, "operator": "DoesNotExist"},
                        ]
                    },
                }
            },
        },
    }


def topology_labels(cluster: LocalCluster) -> dict[str, dict[str, str]]:
    return {n: node_state(cluster, n)["labels"] for n in TOPOLOGY_GPU_NODES}


async def test_topology_gpu_nodes_carry_verified_labels(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    policies: list[str],
) -> None:
    """The topology file's own GPU nodes: labelled from the EC2 table, then with GPU Feature
    Discovery's figures once the policy puts it first; pods asking for an A100 or H100 over
    40 GiB land on the p4de and the p5 only; and deleting the policy takes back our labels
    and the ownership annotation."""
    policies.append("topology-gpus")

    # The EC2 table first: MiB per GPU as EC2 reports it; the broken node (GFD labels, but
    # 0 GPUs allocatable) gets nothing.
    apply(cluster, topology_policy(["InstanceType", "GPUFeatureDiscovery"]))
    by_table = {
        "gpu-a-g5": {MODEL: "A10G", MEMORY: "22888"},
        "gpu-b-p4d": {MODEL: "A100", MEMORY: "40960"},
        "gpu-c-p4de": {MODEL: "A100", MEMORY: "81920"},
        "gpu-a-p5": {MODEL: "H100", MEMORY: "81920"},
        "gpu-b-broken": {},
    }
    wait_until(
        lambda: topology_labels(cluster) == by_table,
        within=30,
        what="table labels on the topology's GPU nodes",
    )

    # "A100 or H100 with more than 40 GiB": the real scheduler uses p4de and p5, never p4d.
    # (The issue wrote `Gt 40959`, which admits p4d's 40960 from its own table; `Gt 40960`
    # is what "only p4de or p5" needs.)
    await place_and_check(api, namespace, {}, "Gt", "40960", {"gpu-c-p4de", "gpu-a-p5"})

    # GFD first: NVML's figures where GFD runs; the p4d has no GFD labels and falls back.
    apply(cluster, topology_policy(["GPUFeatureDiscovery", "InstanceType"]))
    by_gfd = {
        **by_table,
        "gpu-a-g5": {MODEL: "A10G", MEMORY: "23028"},
        "gpu-a-p5": {MODEL: "H100", MEMORY: "81559"},
    }
    wait_until(
        lambda: topology_labels(cluster) == by_gfd,
        within=30,
        what="GFD labels on the topology's GPU nodes",
    )

    # Deleting the policy takes back exactly our labels and the ownership annotation.
    cluster.kubectl("delete", "spol", "topology-gpus", "--wait=true")
    wait_until(
        lambda: all(
            node_state(cluster, n)["labels"] == {} and node_state(cluster, n)["owned"] is None
            for n in TOPOLOGY_GPU_NODES
        ),
        within=30,
        what="our labels gone from the topology's GPU nodes",
    )
    p5 = get_json(cluster, "node", "gpu-a-p5")["metadata"]["labels"]
    assert (p5[PRODUCT], p5[GFD_MEMORY]) == ("NVIDIA-H100-80GB-HBM3", "81559")
