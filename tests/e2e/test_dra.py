"""GPUs under DRA: KWOK nodes whose devices are published in ResourceSlices through the API,
as NVIDIA's DRA driver publishes them, the real scheduler allocating the claims, and the
real ReplicaSet controller deleting pods by the costs that GPU fill gives them.

The resource.k8s.io/v1 API is the same on 1.35 and 1.37, so these run on both lanes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster, binaries, chart
from localcluster import dra_driver as drv
from localcluster.operator_process import OperatorProcess
from localcluster.topology import FakeNode
from schedpolicy.app import explain
from schedpolicy.core.gpu.dra import EXTENDED_CLAIM_ANNOTATION as EXTENDED
from schedpolicy.shell.kube import Kube
from tests.e2e.conftest import (
    GFD_MEMORY,
    MEMORY,
    MODEL,
    PRODUCT,
    REFUSALS,
    apply_gpu_fill_policy,
    node_events,
    scale_down,
    wait_for_costs,
)
from tests.e2e.kubeobjects import deployment, eventually, ready_pods, wait_until
from tests.e2e.pools import Pool, apply, apply_namespace_policy, get_json

pytestmark = [pytest.mark.e2e, pytest.mark.compat]
HOSTNAME = "kubernetes.io/hostname"


def publish(cluster: LocalCluster, *objects: dict[str, Any]) -> None:
    """What the driver's kubelet plugin would write; DeviceClasses are cluster-wide and
    shared by every test, so they are applied, never deleted."""
    apply_all(cluster, [*drv.device_classes(), *objects])


def apply_all(cluster: LocalCluster, objects: list[dict[str, Any]]) -> None:
    cluster.kubectl("apply", "-f", "-", objects=objects)


def dra_node(pool: Pool, name: str, pods: str = "20", **labels: str) -> FakeNode:
    """A GPU node with no device plugin: nothing in status.allocatable says it has GPUs."""
    return pool.node(name, cpu="96", pods=pods, instance_type="p5.48xlarge", labels=labels)


async def test_gpu_labels_from_resource_slices(
    cluster: LocalCluster,
    kube: Kube,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
) -> None:
    """GPU labels from DRA: a node whose GPUs only its ResourceSlices publish gets our model
    and memory labels; a device with a garbled or missing product name, an implausible
    memory or in two pools gets a GPULabelRefused Warning and no label; where GPU Feature
    Discovery and DRA disagree, a GPUSourcesDisagree Event says so; and a pool republished
    with a new generation relabels its node."""
    bad_product = drv.gpu_device("x", 0, product="Graphics Device")
    no_product = drv.gpu_device("x", 0, product=None)
    # The apiserver refuses a capacity that is not a quantity, so the memory that reaches us
    # can only be implausible: 80 bytes.
    shared = drv.gpu_device("x", 0)
    nodes = {
        "h100": dra_node(pool, "h100"),
        "disagree": dra_node(
            pool, "disagree", **{PRODUCT: "NVIDIA-A100-SXM4-40GB", GFD_MEMORY: "40960"}
        ),
        "garbled": dra_node(pool, "garbled"),
        "noproduct": dra_node(pool, "noproduct"),
        "memory": dra_node(pool, "memory"),
        "twopools": dra_node(pool, "twopools"),
    }
    pool.create(*nodes.values())
    name = {k: n.name for k, n in nodes.items()}
    before = {
        r: operator.metric(REFUSALS, reason=r) or 0.0
        for r in ("unknown-model", "memory-implausible", "device-in-two-pools")
    }
    publish(
        cluster,
        drv.gpu_slice(name["h100"], 8),
        drv.gpu_slice(name["disagree"], 8),
        drv.resource_slice(name["garbled"], [bad_product]),
        drv.resource_slice(name["noproduct"], [no_product]),
        drv.resource_slice(name["memory"], [drv.gpu_device("x", 0, memory="80")]),
        drv.resource_slice(name["twopools"], [shared], pool="a", name=f"{name['twopools']}-a"),
        drv.resource_slice(name["twopools"], [shared], pool="b", name=f"{name['twopools']}-b"),
    )
    policy = f"dra-labels-{pool.tag}"
    policies.append(policy)
    apply(
        cluster,
        {
            "apiVersion": "schedpolicy.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": policy},
            "spec": {
                "priority": 500,
                "nodeLabels": {
                    "gpu": {
                        "sources": ["GPUFeatureDiscovery", "DRA"],
                        "nodeSelector": {"matchLabels": pool.selector},
                    }
                },
            },
        },
    )
    expected = {
        "h100": {MODEL: "H100", MEMORY: "81559"},
        "disagree": {MODEL: "A100", MEMORY: "40960"},  # GFD comes first
        "garbled": {},
        "noproduct": {},
        "memory": {},
        "twopools": {},
    }
    refused = {
        "garbled": "unknown-model",
        "noproduct": "unknown-model",
        "memory": "memory-implausible",
        "twopools": "device-in-two-pools",
    }
    for key, reason in refused.items():
        events = wait_until(
            lambda node=name[key]: node_events(cluster, node, "GPULabelRefused") or None,  # type: ignore[misc]
            within=60,
            what=f"a GPULabelRefused Event on {key}",
        )
        assert f"DRA refused ({reason})" in events[0]["message"], events[0]["message"]

    def labels(node: str) -> dict[str, str]:
        meta = get_json(cluster, "node", node)["metadata"]
        return {k: v for k, v in meta["labels"].items() if k.startswith("schedpolicy.io/gpu")}

    wait_until(
        lambda: all(labels(name[k]) == v for k, v in expected.items()) or None,
        within=60,
        what="labels from ResourceSlices",
    )
    disagreement = wait_until(
        lambda: node_events(cluster, name["disagree"], "GPUSourcesDisagree") or None,
        within=30,
        what="a GPUSourcesDisagree Event",
    )
    assert (
        "DRA says H100/81559 MiB, GPUFeatureDiscovery says A100/40960 MiB"
        in (disagreement[0]["message"])
    )
    assert [k for k in name if node_events(cluster, name[k], "GPUSourcesDisagree")] == ["disagree"]
    # A refused node gets nothing: no label and no ownership annotation.
    for key in refused:
        meta = get_json(cluster, "node", name[key])["metadata"]
        assert "schedpolicy.io/owned-labels" not in (meta.get("annotations") or {})
    counted = {r: (operator.metric(REFUSALS, reason=r) or 0.0) - before[r] for r in before}
    assert counted == {"unknown-model": 2, "memory-implausible": 1, "device-in-two-pools": 1}

    out = await explain.explain_node(kube, name["h100"])
    assert out["decision"]["source"] == "DRA"
    assert len(out["draDevices"]["devices"]) == 8

    # A driver that republishes its pool with a new generation replaces the old devices:
    # the A100s it now reports relabel the node.
    publish(cluster, drv.gpu_slice(name["h100"], 8, drv.A100_40, generation=2))
    wait_until(
        lambda: labels(name["h100"]) == {MODEL: "A100", MEMORY: "40960"} or None,
        within=60,
        what="labels following the pool's new generation",
    )
    for slice_name in [f"{n}-{drv.DRIVER}" for n in name.values()] + [
        f"{name['twopools']}-a",
        f"{name['twopools']}-b",
    ]:
        cluster.kubectl("delete", "resourceslice", slice_name, "--ignore-not-found")


def claims_by_node(cluster: LocalCluster, namespace: str) -> dict[str, list[str]]:
    """Per node, the devices that this namespace's allocated claims hold."""
    nodes = {
        s["spec"]["pool"]["name"]: s["spec"]["nodeName"]
        for s in get_json(cluster, "resourceslices")["items"]
    }
    held: dict[str, list[str]] = {}
    for claim in get_json(cluster, "resourceclaims", "-n", namespace)["items"]:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            held.setdefault(nodes.get(result["pool"], "?"), []).append(result["device"])
    return held


def held_devices(cluster: LocalCluster, namespace: str, count: int) -> dict[str, int] | None:
    """Devices held per node, once exactly `count` are."""
    held = {n: len(d) for n, d in claims_by_node(cluster, namespace).items()}
    return held if sum(held.values()) == count else None


async def test_dra_gpu_fill_frees_whole_nodes(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """GPU fill under DRA: with GPUs that only ResourceSlices publish, a scale-down frees
    whole nodes as the costs say; `schedpolicy explain pod` names the claim and the device
    behind each share, and `schedpolicy simulate scale-down` names exactly the pods the
    controller deletes."""
    # Four 8-GPU nodes whose GPUs only DRA knows. Pod capacity pins where the 8 one-GPU
    # replicas land (2, 1, 2, 3), and a 6-GPU job on g1 makes it the fullest.
    g1, g2, g3, g4 = pool.create(
        dra_node(pool, "g1", "3"),
        dra_node(pool, "g2", "1"),
        dra_node(pool, "g3", "2"),
        dra_node(pool, "g4", "3"),
    )
    publish(cluster, *(drv.gpu_slice(n.name, 8) for n in (g1, g2, g3, g4)))
    apply_all(
        cluster,
        [
            {
                **drv.claim_template("one-gpu", 1),
                "metadata": {"name": "one-gpu", "namespace": namespace},
            },
            {
                **drv.claim_template("six-gpus", 6),
                "metadata": {"name": "six-gpus", "namespace": namespace},
            },
        ],
    )
    other = deployment("other", 1, node_selector={**pool.selector, HOSTNAME: g1.name}, cpu="1")
    other["spec"]["template"]["spec"] = drv.with_claim(
        other["spec"]["template"]["spec"], "six-gpus"
    )
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment(namespace, other)
    await ready_pods(api, namespace, "app=other", 1)
    doc = deployment("app", 8, node_selector=pool.selector, cpu="2")
    doc["spec"]["template"]["spec"] = drv.with_claim(doc["spec"]["template"]["spec"], "one-gpu")
    await apps.create_namespaced_deployment(namespace, doc)
    before = await ready_pods(api, namespace, "app=app", 8)
    placed = Counter(p.spec.node_name for p in before)
    assert placed == {g1.name: 2, g2.name: 1, g3.name: 2, g4.name: 3}
    # The scheduler allocated every claim: 6 + 2, 1, 2 and 3 devices.
    held = wait_until(
        lambda: held_devices(cluster, namespace, 14),
        within=30,
        what="every claim allocated",
    )
    assert held == {g1.name: 8, g2.name: 1, g3.name: 2, g4.name: 3}

    apply_gpu_fill_policy(
        cluster, policies, f"dra-fill-{namespace}", namespace, deviceClasses=[drv.GPU_CLASS]
    )
    # DRA fill 8/8, 1/8, 2/8 and 3/8. Without the DRA devices no node advertises a GPU, and
    # every pod would cost 0.
    expected = {g1.name: "800", g2.name: "100", g3.name: "200", g4.name: "300"}
    before = await wait_for_costs(api, kube, namespace, lambda p: expected[p.spec.node_name])

    # explain names the claim and device behind each share.
    on_g2 = next(p for p in before if p.spec.node_name == g2.name)
    out = await explain.explain_pod(kube, f"{namespace}/{on_g2.metadata.name}")
    devices = out["cost"]["signals"][0]["devices"]
    assert devices["published"] == 8
    pod = await client.CoreV1Api(api).read_namespaced_pod(on_g2.metadata.name, namespace)
    claim = pod.status.resource_claim_statuses[0].resource_claim_name
    assert [a["claim"] for a in devices["allocated"]] == [f"{namespace}/{claim}"]
    assert [a["device"].split("/")[1] for a in devices["allocated"]] == [g2.name]
    assert "DRA 1 of 8 devices of gpu.nvidia.com" in out["cost"]["signals"][0]["detail"]

    prediction = await explain.simulate_scale_down(kube, f"{namespace}/app", 5)
    assert prediction["certain"], prediction
    _, deleted = await scale_down(api, namespace, before, 5)
    assert {r["pod"] for r in prediction["deleted"]} == {p.metadata.name for p in deleted}

    # g2 and g3 hold no device any more: whole DRA GPU nodes freed, as the costs said.
    held = wait_until(
        lambda: held_devices(cluster, namespace, 11),
        within=60,
        what="the deleted pods' claims released",
    )
    assert held == {g1.name: 8, g4.name: 3}
    for n in (g1, g2, g3, g4):
        cluster.kubectl("delete", "resourceslice", f"{n.name}-{drv.DRIVER}", "--ignore-not-found")


@pytest.mark.skipif(
    binaries.lane() == "1.35",
    reason="DRAExtendedResource is off in 1.35, and its apiserver drops extendedResourceName",
)
async def test_extended_resource_route_packs_and_counts_each_gpu_once(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    kube: Kube,
    policies: list[str],
) -> None:
    """The chart's DeviceClass with extendedResourceName: pods ask for nvidia.com/gpu, get
    DRA devices, and the chart's profile packs them onto one node, where the default
    profile (which scores no GPUs) spreads them. GPU fill counts each device once: as the
    pod's request, not again as the scheduler's claim."""
    (device_class,) = chart.render(
        "templates/dra/deviceclass.yaml", values={"dra": {"extendedResource": {"enabled": True}}}
    )
    nodes = pool.create(*(dra_node(pool, f"x{i}") for i in range(3)))
    publish(cluster, device_class, *(drv.gpu_slice(n.name, 8) for n in nodes))
    apps = client.AppsV1Api(api)
    placed: dict[str, Counter[str]] = {}
    try:
        for scheduler in ("schedpolicy-scheduler", "default-scheduler"):
            doc = deployment(scheduler, 3, node_selector=pool.selector, cpu="1")
            spec = doc["spec"]["template"]["spec"]
            spec["schedulerName"] = scheduler
            spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "2"}
            for i in range(3):  # one at a time: each sees the last one's devices taken
                doc["spec"]["replicas"] = i + 1
                if i == 0:
                    await apps.create_namespaced_deployment(namespace, doc)
                else:
                    await apps.patch_namespaced_deployment_scale(
                        scheduler, namespace, {"spec": {"replicas": i + 1}}
                    )
                pods = await ready_pods(api, namespace, f"app={scheduler}", i + 1)
            placed[scheduler] = Counter(p.spec.node_name for p in pods)
            if scheduler == "schedpolicy-scheduler":
                await check_fill_counts_once(cluster, api, kube, namespace, pods, policies)
            await apps.delete_namespaced_deployment(scheduler, namespace)
            await wait_gone(api, namespace, f"app={scheduler}")
    finally:
        cluster.kubectl(
            "delete", "deviceclass", device_class["metadata"]["name"], "--ignore-not-found"
        )
        for n in nodes:
            cluster.kubectl(
                "delete", "resourceslice", f"{n.name}-{drv.DRIVER}", "--ignore-not-found"
            )
    assert sorted(placed["schedpolicy-scheduler"].values()) == [3], placed
    assert sorted(placed["default-scheduler"].values()) != [3], placed


async def wait_gone(api: client.ApiClient, namespace: str, selector: str) -> None:
    core = client.CoreV1Api(api)

    async def probe() -> bool | None:
        return (
            not (await core.list_namespaced_pod(namespace, label_selector=selector)).items or None
        )

    await eventually(probe, within=60, what=f"pods {selector} gone")


async def check_fill_counts_once(
    cluster: LocalCluster,
    api: client.ApiClient,
    kube: Kube,
    namespace: str,
    pods: list[client.V1Pod],
    policies: list[str],
) -> None:
    claims = get_json(cluster, "resourceclaims", "-n", namespace)["items"]
    extended = [
        c for c in claims if (c["metadata"].get("annotations") or {}).get(EXTENDED) == "true"
    ]
    assert len(extended) == 3  # the scheduler's claim for each pod's nvidia.com/gpu
    apply_namespace_policy(
        cluster,
        policies,
        f"dra-extended-{namespace}",
        namespace,
        deletionCost={
            "signals": [
                {
                    "type": "NodeConsolidation",
                    "nodeConsolidation": {
                        "points": 800,
                        "resources": ["nvidia.com/gpu"],
                        "deviceClasses": ["gpu-extended.nvidia.com"],
                    },
                }
            ],
        },
    )
    # 3 pods x 2 GPUs of 8: 6/8 -> 600. Counted twice (requests and claims) it would be 800.
    await wait_for_costs(
        api, kube, namespace, lambda p: "600", selector="app=schedpolicy-scheduler"
    )
    out = await explain.explain_pod(kube, f"{namespace}/{pods[0].metadata.name}")
    devices = out["cost"]["signals"][0]["devices"]
    assert (devices["published"], devices["allocated"]) == (8, [])
    assert len(devices["extendedResourceClaims"]) == 6
