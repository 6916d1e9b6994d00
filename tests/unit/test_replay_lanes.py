"""The replay lanes as data (bench/replay/lanes.yaml): what each lane changes, and every
bad lane file or lane choice refused with the file and the field, before any cluster starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.replay import lane_spec
from bench.replay.lane import deployment, karpenter_options
from bench.replay.plan import Shape, Timers


def test_b7_runs_the_standard_lanes_the_product_beside_the_gate_and_headroom() -> None:
    b7 = lane_spec.benchmark("B7")
    assert [lane.name for lane in b7.lanes] == [
        "karpenter-alone", "karpenter-gate", "profile-gate", "product", "product-gate",
        "product-gate-headroom",
    ]  # fmt: skip
    by = {lane.name: lane for lane in b7.lanes}
    assert by["karpenter-gate"].karpenter_gates == {"PodDeletionCostManagement": True}
    assert by["profile-gate"].scheduler == "schedpolicy-scheduler"
    assert not by["profile-gate"].product
    assert by["product"].product
    assert not by["product"].karpenter_gates
    assert (by["product-gate-headroom"].headroom, by["product-gate-headroom"].headroom_gpus) == (
        2,
        2,
    )
    assert ("product", "karpenter-gate") in b7.comparisons()
    assert b7.comparisons()[0] == ("karpenter-gate", "karpenter-alone")


def test_b7e_runs_the_configurations_that_evict_nothing() -> None:
    b7e = {lane.name: lane for lane in lane_spec.benchmark("B7E").lanes}
    assert {n for n, lane in b7e.items() if lane.gpu_consolidation == "WhenEmpty"} == {
        "when-empty-alone", "when-empty-gate", "when-empty-product", "when-empty-product-headroom",
    }  # fmt: skip
    dnd = {n for n, lane in b7e.items() if lane.gpu_pod_annotations}
    assert dnd == {"do-not-disrupt-alone", "do-not-disrupt-product"}
    assert b7e["do-not-disrupt-product"].gpu_pod_annotations == {
        "karpenter.sh/do-not-disrupt": "true"
    }


def test_a_lane_reaches_the_cluster_as_its_fields_say() -> None:
    """The gate and the pool's policy go to Karpenter, on the replay's clock; the annotation
    goes to GPU replicas only; the policy is the benchmark's, merged."""
    lanes, _ = lane_spec.read()
    timers = Timers(compression=20)
    gate = karpenter_options(lanes["when-empty-gate"], timers)
    assert gate.feature_gates == {"PodDeletionCostManagement": True}
    assert gate.gpu_consolidation == "WhenEmpty"
    assert (gate.time_scale, gate.consolidate_after, gate.registration_delay) == (20, "15s", 5)
    dnd = lanes["do-not-disrupt-alone"].gpu_pod_annotations
    gpu = deployment(Shape("g", 1, "1", "1Gi"), "ns", 1, 2.0, None, dnd)
    cpu = deployment(Shape("c", 0, "1", "1Gi"), "ns", 1, 2.0, None, dnd)
    assert (
        gpu["spec"]["template"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    )
    assert "karpenter.sh/do-not-disrupt" not in cpu["spec"]["template"]["metadata"]["annotations"]
    base: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {"deletionCost": {"min": 0, "max": 9}},
    }
    spec = lane_spec.LaneSpec("x", "red", policy={"deletionCost": {"max": 5}})
    assert spec.policy_for(base)["spec"] == {"deletionCost": {"min": 0, "max": 5}}
    assert base["spec"]["deletionCost"]["max"] == 9


def _write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "lanes.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


GOOD: dict[str, Any] = {
    "lanes": {"a": {"colour": "red"}, "b": {"colour": "blue", "policy": {}}},
    "benchmarks": {"B7": {"lanes": ["a", "b"], "pairs": ["b / a"]}},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lanes": {"a": {"colour": "red", "speed": 2}}}, "lanes.a.speed: unknown field"),
        ({"lanes": {"a": {}}}, "lanes.a.colour: a matplotlib colour is required"),
        (
            {"lanes": {"a": {"colour": "red", "gpu_consolidation": "WhenIdle"}}},
            "lanes.a.gpu_consolidation: 'WhenIdle' is not a consolidationPolicy",
        ),
        (
            {"lanes": {"a": {"colour": "red", "karpenter_gates": {"X": "yes"}}}},
            "lanes.a.karpenter_gates: a mapping of gate name to true or false",
        ),
        (
            {"lanes": {"a": {"colour": "red", "headroom": {"replicas": -1}}}},
            "lanes.a.headroom.replicas: a whole number of placeholder pods",
        ),
        (
            {"lanes": {"a": {"colour": "red", "headroom": {"replicas": 1, "gpus": 0}}}},
            "lanes.a.headroom.gpus: a whole number of GPUs a placeholder holds",
        ),
        (
            {"lanes": {"a": {"colour": "red", "headroom": 2}}},
            r"lanes.a.headroom: a mapping \{replicas: N, gpus: G\} is required",
        ),
        (
            {"benchmarks": {"B7": {"lanes": ["a", "c"]}}},
            r"benchmarks.B7.lanes\[1\]: unknown lane 'c'",
        ),
        (
            {"benchmarks": {"B7": {"lanes": ["a", "a"]}}},
            r"benchmarks.B7.lanes\[1\]: lane 'a' is listed twice",
        ),
        (
            {"benchmarks": {"B7": {"lanes": ["a"], "pairs": ["b / a"]}}},
            r"benchmarks.B7.pairs\[0\]: 'b / a' is not 'lane / against'",
        ),
    ],
)
def test_a_bad_lane_file_is_refused_with_the_file_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    doc = {**GOOD, **change}
    path = _write(tmp_path, doc)
    with pytest.raises(lane_spec.LaneError, match=f"{path}: {message}"):
        lane_spec.benchmark("B7", path=path)


def test_an_unknown_lane_on_the_command_line_is_refused_naming_the_flag(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    with pytest.raises(lane_spec.LaneError, match=r"--lanes\[0\]: unknown lane 'z'"):
        lane_spec.benchmark("B7", ["z"], path=path)
    chosen = lane_spec.benchmark("B7", ["b"], path=path)
    assert [lane.name for lane in chosen.lanes] == ["b"]
    assert chosen.pairs == ()
