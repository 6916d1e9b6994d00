"""The product as users run it: the chart installed with helm onto a real kubelet node.

One cluster for the module, with the real node (containerd, runc, kubelet, kube-proxy, CNI
bridge) next to a few KWOK nodes for the workloads. The chart's images are the ones
`make image` built from the Dockerfile; the node imports them. The fixture tears everything
down in `finally`, and `localcluster leftovers` then finds nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import LocalCluster, hostnet
from localcluster.binaries import REPO
from localcluster.topology import FakeNode

WORKDIR = REPO / ".cluster" / "incluster"
VALUES = Path(__file__).with_name("values.yaml")
POOL = {"schedpolicy.io/pool": "incluster"}


def kwok_nodes() -> list[FakeNode]:
    def node(name: str, instance_type: str, gpus: str | None, **labels: str) -> FakeNode:
        resources = {"cpu": "96", "memory": "512Gi", "pods": "400"}
        if gpus:
            resources["nvidia.com/gpu"] = gpus
        return FakeNode(
            name=name,
            zone="us-east-1a",
            region="us-east-1",
            instance_type=instance_type,
            capacity=resources,
            allocatable=resources,
            labels={**POOL, **labels},
        )

    return [
        node("gpu-a", "p4de.24xlarge", "8"),
        node("gpu-b", "p4de.24xlarge", "8", **{"karpenter.sh/capacity-type": "spot"}),
        node("cpu-a", "m5.4xlarge", None),
    ]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    made = LocalCluster(WORKDIR)
    try:
        made.up(kwok_nodes(), real_node=True)
        yield made
    finally:
        made.down()
    left = hostnet.leftovers(WORKDIR)
    assert not left, f"the real node left these behind: {left}"
