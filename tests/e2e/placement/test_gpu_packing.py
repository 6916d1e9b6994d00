"""GPU nodes kept for GPU work: the chart's scheduler profile packs GPU pods onto as few nodes
as it can, and an avoidGPUNodes policy keeps CPU pods off GPU nodes."""

from __future__ import annotations

from collections import Counter

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from tests.e2e.placement.conftest import SCHEDULER, CreatePod, bound, gpu_pod, settled
from tests.e2e.pools import Pool, apply_namespace_policy

pytestmark = pytest.mark.e2e


async def test_profile_packs_gpus_where_the_default_scheduler_spreads(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
) -> None:
    """The chart's scheduler profile packs 8 GPU pods onto one node, where the default
    scheduler spreads the same pods over several."""
    ours = [
        pool.node(f"pack{i}", gpus="8", cpu="96", pods="100", labels={"group": "ours"})
        for i in range(4)
    ]
    theirs = [
        pool.node(f"spread{i}", gpus="8", cpu="96", pods="100", labels={"group": "default"})
        for i in range(4)
    ]
    pool.create(*ours, *theirs)
    core = client.CoreV1Api(api)
    for i in range(8):
        for group, scheduler in (("ours", SCHEDULER), ("default", "default-scheduler")):
            pod = gpu_pod(
                f"{group}-{i}",
                pool,
                labels={"app": "pack", "group": group, "schedpolicy.io/ignore": "true"},
                schedulerName=scheduler,
            )
            pod["spec"]["nodeSelector"] = {**pool.selector, "group": group}
            await core.create_namespaced_pod(namespace, pod)
    packed = await bound(api, namespace, "group=ours", 8)
    spread = await bound(api, namespace, "group=default", 8)

    assert len({p.spec.node_name for p in packed}) == 1, Counter(p.spec.node_name for p in packed)
    assert len({p.spec.node_name for p in spread}) > 1


async def test_cpu_pods_avoid_gpu_nodes(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """An avoidGPUNodes policy: CPU pods run on the CPU node, placed by our scheduler.
    Without the hint, our bin-packing profile would prefer the smaller GPU node (a
    500m pod fills more of its 4 CPUs than of the CPU node's 64)."""
    gpu_node = pool.node(
        "gpu",
        instance_type="g5.12xlarge",
        gpus="4",
        cpu="4",
        pods="50",
        labels={"nvidia.com/gpu.product": "NVIDIA-A10G"},
    )
    cpu_node = pool.node("cpu", cpu="64", pods="50")
    pool.create(gpu_node, cpu_node)
    apply_namespace_policy(
        cluster, policies, f"avoid-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    await settled(cluster, policies[-1], mode)
    bodies = [gpu_pod(f"web-{i}", pool, gpus="0", labels={"app": "web"}) for i in range(3)]
    for body in bodies:
        await create_pod(namespace, body)
    pods = await bound(api, namespace, "app=web", 3)
    assert {p.spec.node_name for p in pods} == {cpu_node.name}
    assert {p.spec.scheduler_name for p in pods} == {SCHEDULER}
