"""The envelope's fleet, grown in steps: fake nodes (CPU and GPU, three zones, spot and
on-demand), ReplicaSets, and their pods created already bound to a node.

The bench stands in for the ReplicaSet controller and the scheduler while it fills the
cluster (B8 runs kube-controller-manager without the ReplicaSet and Deployment controllers,
and without the default scheduler): each pod is POSTed with its ReplicaSet's owner
reference and its node, which is what those two would have written, in one request instead
of three. KWOK then makes it Running as usual.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from pathlib import Path

from bench import fleet as common
from bench.envelope.api import JSON, Api, Tally
from localcluster.component import has_ready_condition

LABEL = {"bench": "envelope"}
GPU_PRODUCT = "NVIDIA-A100-SXM4-80GB"
GPU_PODS_PER_NODE = 4
# Below this much available memory the fleet stops growing: the controller, the verifying
# listings and the churn still need room, and an OOM kill would end the run unmeasured.
MEMORY_FLOOR_GIB = 3.0  # of 8 GPUs: half-full GPU nodes, as a serving fleet runs them


@dataclass(frozen=True)
class Step:
    """One growth step: the fleet's totals once it is done."""

    pods: int
    nodes: int


STEPS = {
    "small": (Step(2000, 100), Step(4000, 200), Step(6000, 300)),
    "full": (Step(30_000, 1000), Step(75_000, 2500), Step(150_000, 5000)),
}
REPLICAS = {"small": 100, "full": 1000}


@dataclass(frozen=True)
class Grown:
    """What one step added, and how fast the apiserver took it."""

    namespace: str
    pods: list[tuple[str, str, str]]  # (namespace, name, node) of each pod it created
    nodes: list[str]
    node_seconds: float
    pod_seconds: float
    running_seconds: float
    refused: dict[int, int]  # HTTP status -> count, of the creates APF or etcd refused
    halted: str | None = None  # why it stopped short of the step's pods

    @property
    def pods_per_second(self) -> float:
        return round(len(self.pods) / self.pod_seconds, 1)


def node_manifests(step: int, cpu: int, gpu: int) -> list[JSON]:
    cpu_nodes = common.fake_nodes(f"env{step}-cpu", cpu)
    gpu_nodes = common.fake_nodes(
        f"env{step}-gpu",
        gpu,
        cpu="96",
        gpus=8,
        labels={"nvidia.com/gpu.product": GPU_PRODUCT, "nvidia.com/gpu.memory": "81920"},
    )
    return [n.manifest() for n in cpu_nodes + gpu_nodes]


def replicaset(name: str, namespace: str, replicas: int, gpu: bool) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(gpu)},
        },
    }


def pod_spec(gpu: bool) -> JSON:
    requests = {"cpu": "50m", "memory": "64Mi"}
    if gpu:
        requests["nvidia.com/gpu"] = "1"
    return {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "app",
                "image": common.PAUSE,
                "resources": {"requests": requests, "limits": requests if gpu else {}},
            }
        ],
    }


def pod(owner: JSON, index: int, node: str, gpu: bool) -> JSON:
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{index:05d}",
            "namespace": meta["namespace"],
            "labels": {"app": meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**pod_spec(gpu), "nodeName": node},
    }


def _placements(
    rng: random.Random, cpu_nodes: list[str], gpu_nodes: list[str], pods: int, replicas: int
) -> list[tuple[int, bool, list[str]]]:
    """(replicas, gpu, node of each replica) per ReplicaSet: one GPU serving set at four pods
    a GPU node, and CPU sets spread at random, so that nodes and zones differ in how full
    they are (what NodeConsolidation and ZoneBalance rank by)."""
    gpu_set = [n for n in gpu_nodes for _ in range(GPU_PODS_PER_NODE)]
    sets: list[tuple[int, bool, list[str]]] = [(len(gpu_set), True, gpu_set)] if gpu_set else []
    left = pods - len(gpu_set)
    while left > 0:
        n = min(replicas, left)
        sets.append((n, False, [rng.choice(cpu_nodes) for _ in range(n)]))
        left -= n
    return sets


async def grow(api: Api, index: int, before: Step, after: Step, replicas: int) -> Grown:
    """Adds the step's nodes and pods in a namespace of its own; returns once every pod runs."""
    rng = random.Random(index)
    namespace = f"envelope-{index}"
    add_nodes = after.nodes - before.nodes
    gpu = max(1, add_nodes // 10)
    tally = Tally()

    def progress(what: str) -> object:
        return lambda n: print(f"B8 step {index}: {n} {what} created", flush=True)

    t0 = time.monotonic()
    nodes = node_manifests(index, add_nodes - gpu, gpu)
    await api.create_all((("/api/v1/nodes", n) for n in nodes), tally, progress("nodes"))
    names = [n["metadata"]["name"] for n in nodes]
    await _wait_nodes_ready(api, set(names))
    node_seconds = time.monotonic() - t0

    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": LABEL}}
    await api.request("POST", "/api/v1/namespaces", ns)
    cpu_nodes = names[: add_nodes - gpu]
    sets = _placements(rng, cpu_nodes, names[add_nodes - gpu :], after.pods - before.pods, replicas)
    owners = await api.create_all(
        (
            (
                f"/apis/apps/v1/namespaces/{namespace}/replicasets",
                replicaset(f"set-{i:03d}", namespace, n, is_gpu),
            )
            for i, (n, is_gpu, _) in enumerate(sets)
        ),
        tally,
        progress("ReplicaSets"),
    )
    t1 = time.monotonic()
    bodies = [
        pod(owner, j, node, is_gpu)
        for owner, (_, is_gpu, placed) in zip(owners, sets, strict=True)
        for j, node in enumerate(placed)
    ]
    path = f"/api/v1/namespaces/{namespace}/pods"
    made = await api.create_all(
        ((path, b) for b in bodies), tally, progress("pods"), short_of_memory
    )
    pod_seconds = time.monotonic() - t1
    await _wait_running(api, namespace, len(made))
    created = [(namespace, m["metadata"]["name"], m["spec"]["nodeName"]) for m in made]
    halted = None
    if len(made) < len(bodies):
        halted = (
            f"stopped at {before.pods + len(made)} pods: MemAvailable fell below"
            f" {MEMORY_FLOOR_GIB} GiB ({available_gib():.1f} GiB left)"
        )
    refused = {code: n for code, n in tally.codes.items() if code not in (200, 201)}
    return Grown(
        namespace,
        created,
        names,
        round(node_seconds, 1),
        round(pod_seconds, 1),
        round(time.monotonic() - t1, 1),
        refused,
        halted,
    )


def available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def short_of_memory() -> bool:
    """Whether growing further would put the machine's own processes at risk: the fleet
    stops there, and the step is measured at the size it reached."""
    return available_gib() < MEMORY_FLOOR_GIB


async def _wait_nodes_ready(api: Api, names: set[str], within: float = 1800) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        ready = set()
        async for node in api.pages("/api/v1/nodes"):
            if node["metadata"]["name"] in names and _schedulable(node):
                ready.add(node["metadata"]["name"])
        if ready >= names:
            return
        await asyncio.sleep(5)
    raise TimeoutError(f"{len(names)} envelope nodes not Ready within {within}s")


def _schedulable(node: JSON) -> bool:
    taints = node.get("spec", {}).get("taints") or ()
    untainted = not any(t["key"] == "node.kubernetes.io/not-ready" for t in taints)
    return has_ready_condition(node) and untainted


async def _wait_running(api: Api, namespace: str, count: int, within: float = 3600) -> None:
    """Until no pod of the namespace is short of Running, asked with a field selector so that
    only the stragglers cross the wire."""
    deadline = time.monotonic() + within
    path = f"/api/v1/namespaces/{namespace}/pods"
    while time.monotonic() < deadline:
        code, page = await api.request(
            "GET", path + "?fieldSelector=status.phase%21%3DRunning&limit=1"
        )
        # A field selector leaves remainingItemCount out: an empty last page says none is left.
        if code == 200 and not page["items"] and not page["metadata"].get("continue"):
            return
        await asyncio.sleep(5)
    raise TimeoutError(f"{count} envelope pods in {namespace} not Running within {within}s")
