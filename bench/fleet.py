"""Creating many fake nodes and workloads quickly, and waiting for them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from localcluster import LocalCluster
from localcluster.topology import FakeNode

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
PAUSE = "registry.k8s.io/pause:3.10"


def fake_nodes(
    prefix: str,
    count: int,
    *,
    cpu: str = "16",
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    pods: str = "110",
) -> list[FakeNode]:
    nodes = []
    for i in range(count):
        capacity = {"cpu": cpu, "memory": "64Gi", "pods": pods}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        spot = i % 3 == 0
        nodes.append(
            FakeNode(
                name=f"{prefix}-{i:04d}",
                zone=ZONES[i % len(ZONES)],
                region="us-east-1",
                instance_type="m5.4xlarge" if not gpus else "p4d.24xlarge",
                capacity=capacity,
                allocatable=capacity,
                labels={
                    "bench": prefix,
                    "karpenter.sh/capacity-type": "spot" if spot else "on-demand",
                    **(labels or {}),
                },
            )
        )
    return nodes


def create_in_batches(
    cluster: LocalCluster, docs: Iterable[dict[str, Any]], batch: int = 200
) -> None:
    chunk: list[dict[str, Any]] = []
    for doc in docs:
        chunk.append(doc)
        if len(chunk) == batch:
            cluster.kubectl("create", "-f", "-", objects=chunk)
            chunk = []
    if chunk:
        cluster.kubectl("create", "-f", "-", objects=chunk)


def deployment(
    name: str,
    namespace: str,
    replicas: int,
    node_selector: dict[str, str],
    cpu: str = "50m",
    scheduler: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": node_selector,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}}],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def pods(
    cluster: LocalCluster, namespace: str, selector: str | None = None
) -> list[dict[str, Any]]:
    args = ["get", "pods", "-n", namespace, "-o", "json"]
    if selector:
        args += ["-l", selector]
    # 30k pods (SCALE=large) are about 100 MB of JSON: minutes on a busy 2-core machine.
    return list(json.loads(cluster.kubectl(*args, timeout=900))["items"])


def not_running(cluster: LocalCluster, namespace: str) -> int:
    """How many of the namespace's pods are not Running yet, listed by the apiserver's
    field selector, so that only those few cross the wire while a large fleet starts."""
    names = cluster.kubectl(
        "get",
        "pods",
        "-n",
        namespace,
        "--field-selector=status.phase!=Running",
        "-o",
        "name",
        timeout=900,
    )
    return len(names.split())


def replicas(cluster: LocalCluster, namespace: str, field: str = "replicas") -> int:
    """A status count summed over the namespace's Deployments.

    The cheap progress probe: listing every pod of a 10k-pod fleet every few seconds makes
    the apiserver serialize tens of MB each time, which slows the very thing being timed.
    """
    items = json.loads(cluster.kubectl("get", "deployments", "-n", namespace, "-o", "json"))
    return sum(int(d.get("status", {}).get(field) or 0) for d in items["items"])


def wait_for(probe: Callable[[], Any], what: str, within: float = 600, every: float = 2.0) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        result = probe()
        if result:
            return result
        time.sleep(every)
    raise TimeoutError(f"timed out after {within}s waiting for {what}")


def running(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get(
        "deletionTimestamp"
    )


def namespace(cluster: LocalCluster, name: str) -> None:
    cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: cluster.kubectl("get", "sa", "default", "-n", name, check=False),
        "the default SA",
        60,
        0.2,
    )
