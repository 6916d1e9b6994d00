from __future__ import annotations

from typing import Any

import pytest

from localcluster import topology

GPU = "nvidia.com/gpu"


def test_repo_topology_covers_what_the_tests_need() -> None:
    nodes = topology.load()
    by_name = {n.name: n for n in nodes}

    assert {n.zone for n in nodes} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert {n.labels.get("karpenter.sh/capacity-type") for n in nodes} >= {"spot", "on-demand"}
    assert {n.labels.get("eks.amazonaws.com/capacityType") for n in nodes} >= {"SPOT", "ON_DEMAND"}
    assert {n.instance_type.split(".")[0] for n in nodes} >= {"c5", "m5", "r5"}
    gpus = {n.instance_type: n.allocatable.get(GPU) for n in nodes if n.name != "gpu-b-broken"}
    assert gpus["g5.12xlarge"] == "4"
    assert gpus["p4d.24xlarge"] == gpus["p4de.24xlarge"] == gpus["p5.48xlarge"] == "8"
    assert by_name["gpu-b-broken"].allocatable[GPU] == "0"
    assert "nvidia.com/gpu.product" in by_name["gpu-b-broken"].labels
    assert any(
        "nvidia.com/gpu.product" in n.labels for n in nodes if n.allocatable.get(GPU, "0") != "0"
    )


def test_manifest_is_a_kwok_managed_node() -> None:
    node = topology.FakeNode(
        name="n1",
        zone="z1",
        region="r",
        instance_type="m5.xlarge",
        capacity={"cpu": "4"},
        allocatable={"cpu": "3920m"},
        labels={"extra": "yes"},
    )
    m = node.manifest()

    assert m["metadata"]["annotations"] == {topology.FAKE_NODE_ANNOTATION: "fake"}
    assert m["metadata"]["labels"][topology.ZONE_LABEL] == "z1"
    assert m["metadata"]["labels"][topology.INSTANCE_TYPE_LABEL] == "m5.xlarge"
    assert m["metadata"]["labels"]["extra"] == "yes"
    assert m["status"] == {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3920m"}}
    assert m["spec"] == {}  # untainted: any pod may land on it


def test_per_node_allocatable_overrides_the_instance_type() -> None:
    doc = {
        "instanceTypes": {"g": {"allocatable": {"cpu": "4", GPU: "4"}}},
        "nodes": [{"name": "a", "zone": "z", "instanceType": "g", "allocatable": {GPU: 0}}],
    }
    (node,) = topology.parse(doc)
    assert node.allocatable == {"cpu": "4", GPU: "0"}
    assert node.capacity == {"cpu": "4", GPU: "4"}


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"nodes": [{"zone": "z", "instanceType": "t"}]}, "nodes[0].name"),
        ({"nodes": [{"name": "a", "instanceType": "t"}]}, "nodes[0].zone"),
        ({"nodes": [{"name": "a", "zone": "z", "instanceType": "nope"}]}, "nodes[0].instanceType"),
        (
            {
                "instanceTypes": {"t": {"allocatable": {}}},
                "nodes": [
                    {"name": "a", "zone": "z", "instanceType": "t"},
                    {"name": "a", "zone": "z", "instanceType": "t"},
                ],
            },
            "nodes[1].name",
        ),
        ({"instanceTypes": {"t": {"capacity": {}}}}, "instanceTypes.t.allocatable"),
        (
            {
                "instanceTypes": {"t": {"allocatable": {}}},
                "nodes": [{"name": "a", "zone": "z", "instanceType": "t", "labels": ["x"]}],
            },
            "nodes[0].labels",
        ),
    ],
)
def test_bad_topology_names_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(topology.TopologyError) as err:
        topology.parse(doc)
    assert str(err.value).startswith(f"{field}:")
