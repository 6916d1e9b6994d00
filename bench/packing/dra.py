"""B4-DRA: B4's stream of GPU pods with the GPUs asked for through DRA, on nodes whose GPUs
only their ResourceSlices publish (no device plugin, no nvidia.com/gpu allocatable).

Four lanes, all the real kube-scheduler, each against B4's first-fit-decreasing bound:
- a ResourceClaim per pod, naming the driver's DeviceClass, through the default profile and
  through the chart's profile. The DynamicResources plugin scores no utilization (it ranks
  only the prioritized-list alternative chosen), so neither profile has a reason to pack;
  this measures how far that leaves them from the bound;
- `nvidia.com/gpu` requests through the chart's DeviceClass with extendedResourceName,
  through both profiles. NodeResourcesFit then scores the class's devices as the node's
  nvidia.com/gpu (DRAExtendedResource, GA in 1.37), so MostAllocated packs them.

Each of the four, at each of two CPU requests per pod, is a lane (bench.lanes), taken in
turn on the same nodes.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import fleet
from bench.lanes import Lane, compare, medians, ratio, rounded, run_in_turn, summarise
from bench.packing import stream
from bench.scale import Scale
from localcluster import LocalCluster, chart
from localcluster import dra_driver as drv

NAMESPACE = "bench-packing-dra"
PREFIX = "packing-dra"
SIZES = stream.SIZES


# The CPU each pod requests. B4's 10m leaves every node's CPU score equal, and the
# scheduler then breaks the tie the same way for every pod that it does not batch (pods with
# claims are never batched): first fit in node order, which packs by accident. With CPU in
# proportion to the GPUs (10 cores a GPU, as on a 96-core 8-GPU node), a profile must
# decide, and the default profile's LeastAllocated spreads.
CPU_SHAPES: dict[str, Callable[[int], str]] = {
    "cpu_10m": lambda gpus: "10m",
    "cpu_per_gpu": lambda gpus: str(10 * gpus),
}


def pod(name: str, gpus: int, scheduler: str, route: str, cpu: str = "10m") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "nodeSelector": {"bench": PREFIX},
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "c", "image": fleet.PAUSE, "resources": {"requests": {"cpu": cpu}}}
        ],
    }
    if route == "claims":
        spec = drv.with_claim(spec, f"gpus-{gpus}")
    else:
        spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "gpu-stream-dra", "gpus": str(gpus)},
        },
        "spec": spec,
    }


def settled(cluster: LocalCluster, count: int) -> list[dict[str, Any]] | None:
    return stream.settled(cluster, count, NAMESPACE, "app=gpu-stream-dra")


def claims_left(cluster: LocalCluster) -> bool | None:
    """True once no claim of the stream is left: the next lane starts with every device free."""
    out = cluster.kubectl("get", "resourceclaims", "-n", NAMESPACE, "-o", "name")
    return not out.strip() or None


def place(
    cluster: LocalCluster,
    sizes: list[int],
    scheduler: str,
    route: str,
    nodes: list[str],
    shape: str = "cpu_10m",
) -> dict[str, Any]:
    cpu = CPU_SHAPES[shape]
    docs = [pod(f"d{i:04d}", size, scheduler, route, cpu(size)) for i, size in enumerate(sizes)]
    t0 = time.monotonic()
    fleet.create_in_batches(cluster, docs, batch=100)
    fleet.wait_for(lambda: settled(cluster, len(sizes)), f"{scheduler}/{route}", 900, 2)
    seconds = time.monotonic() - t0
    time.sleep(5)  # let a retry of the unschedulable ones happen
    pods = settled(cluster, len(sizes)) or []
    used: Counter[str] = Counter()
    pending = 0
    for p in pods:
        gpus = int(p["metadata"]["labels"]["gpus"])
        if p["spec"].get("nodeName"):
            used[p["spec"]["nodeName"]] += gpus
        else:
            pending += 1
    cluster.kubectl(
        "delete", "pods", "-l", "app=gpu-stream-dra", "-n", NAMESPACE,
        "--grace-period=0", "--wait=true", "--timeout=300s",
    )  # fmt: skip
    fleet.wait_for(lambda: claims_left(cluster), "the stream's claims deleted", 300, 2)
    result: dict[str, Any] = stream.outcome(
        [stream.GPUS_PER_NODE - used[n] for n in nodes], pending
    )
    result["seconds_to_place"] = round(seconds, 1)
    return result


LANES = (
    ("default_claims", "default-scheduler", "claims"),
    ("ours_claims", "schedpolicy-scheduler", "claims"),
    ("default_extended", "default-scheduler", "extended"),
    ("ours_extended", "schedpolicy-scheduler", "extended"),
)
ROUTES = ("claims", "extended")
FIGURES = ("free_nodes", "placeable_8gpu_pods", "pending_pods", "seconds_to_place")


def dra_lane(
    shape: str, key: str, route: tuple[str, str], sizes: list[int], nodes: list[str]
) -> Lane:
    """The stream through one profile (`route`: scheduler and how pods ask for GPUs), its
    pods' CPU by `shape`."""
    scheduler, how = route
    return Lane(
        f"{shape}/{key}",
        lambda cluster, repeat: place(cluster, sizes, scheduler, how, nodes, shape),
    )


def setup(cluster: LocalCluster, scale: Scale) -> list[str]:
    """The nodes, their ResourceSlices, the DeviceClasses and the claim templates; the
    nodes' names."""
    nodes = fleet.fake_nodes(PREFIX, scale.gpu_nodes, cpu="96")
    cluster.create_nodes(nodes, timeout=300)
    fleet.namespace(cluster, NAMESPACE)
    (extended_class,) = chart.render(
        "templates/dra/deviceclass.yaml", values={"dra": {"extendedResource": {"enabled": True}}}
    )
    templates = [
        {**t, "metadata": {"name": t["metadata"]["name"], "namespace": NAMESPACE}}
        for t in (drv.claim_template(f"gpus-{s}", s) for s in SIZES)
    ]
    cluster.kubectl(
        "apply", "-f", "-",
        objects=[
            *drv.device_classes(), extended_class, *templates,
            *(drv.gpu_slice(n.name, stream.GPUS_PER_NODE) for n in nodes),
        ],
    )  # fmt: skip
    return [n.name for n in nodes]


def run_b4_dra(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
    names = setup(cluster, scale)
    sizes = stream.gpu_stream(scale.gpu_seed, scale.gpu_nodes * stream.GPUS_PER_NODE)
    bound = stream.first_fit_decreasing(sizes, scale.gpu_nodes)
    lanes = [
        dra_lane(shape, key, (sched, route), sizes, names)
        for shape in CPU_SHAPES
        for key, sched, route in LANES
    ]
    runs = run_in_turn(lanes, scale.repeats, cluster)
    shapes: dict[str, dict[str, Any]] = {}
    for shape in CPU_SHAPES:
        lanes_ = shapes[shape] = {key: medians(runs[f"{shape}/{key}"]) for key, _, _ in LANES}
        for lane in lanes_.values():
            lane["ratio"] = ratio(lane["free_nodes"], bound["free_nodes"])
    spreads = summarise(runs, FIGURES)
    return {
        "name": "B4-DRA GPU packing",
        **stream.described(scale, sizes),
        "shapes": shapes,
        "ffd_bound": bound,
        "goal": "our profile's free nodes >= 95% of the FFD bound",
        "repeats": scale.repeats,
        "spread": rounded(spreads, 1),
        "compared": {
            f"{shape}/ours_vs_default_{route}": compare(
                spreads[f"{shape}/ours_{route}"], spreads[f"{shape}/default_{route}"], FIGURES
            )
            for shape in CPU_SHAPES
            for route in ROUTES
        },
    }
