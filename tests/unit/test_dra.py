"""DRA: the selector subset, what a node's slices publish, the DRA label source, GPU fill."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from localcluster import dra_driver as drv
from schedpolicy.core.api import SpecError, parse_spec
from schedpolicy.core.consolidation import fill
from schedpolicy.core.consolidation.api import NodeConsolidationSignal
from schedpolicy.core.deletion_cost.signals import node_consolidation
from schedpolicy.core.deletion_cost.signals.base import CostInputs
from schedpolicy.core.gpu import dra
from schedpolicy.core.gpu import label_rules as gpu
from schedpolicy.core.gpu.api import GPULabels
from schedpolicy.core.gpu.device_selectors import DeviceView, SelectorError, evaluate, parse
from schedpolicy.view import snapshot
from schedpolicy.view.cluster import ClusterView
from schedpolicy.view.gpu.devices import claim_record, slice_record

NOW = datetime(2026, 12, 3, tzinfo=UTC)
GPU_DEVICE = DeviceView("gpu.nvidia.com", {"gpu.nvidia.com": {"type": "gpu", "index": 3}})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("device.driver == 'gpu.nvidia.com'", True),
        ('device.driver == "other"', False),
        (
            "device.driver == 'gpu.nvidia.com'"
            " && device.attributes['gpu.nvidia.com'].type == 'gpu'",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].type == 'mig'", False),
        ("device.attributes['gpu.nvidia.com'].type == 'mig' || device.driver != 'x'", True),
        ("!(device.attributes['gpu.nvidia.com'].type == 'gpu')", False),
        ("device.attributes['gpu.nvidia.com']['index'] >= 2", True),
        ("device.attributes['gpu.nvidia.com'].index < 2", False),
        # A missing attribute compares false, as the scheduler would not allocate the device.
        ("device.attributes['gpu.nvidia.com'].productName == 'H100'", False),
        ("device.attributes['gpu.nvidia.com'].index == 'three'", False),
        ("true", True),
    ],
)
def test_selector_subset(expression: str, expected: bool) -> None:
    assert evaluate(parse(expression), GPU_DEVICE) is expected


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        (
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
            "device.capacity",
        ),
        (
            "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('1.0.0'))",
            "method",
        ),
        ("has(device.attributes['x'].y)", "'has'"),
        ("device.driver ==", "ends"),
        ("device.driver == 'a' 'b'", "unexpected"),
    ],
)
def test_selector_outside_the_subset_is_refused(expression: str, says: str) -> None:
    with pytest.raises(SelectorError, match=says):
        parse(expression)


def _published(*slices: dict[str, Any]) -> dra.Published:
    return dra.published(slice_record(s) for s in slices)


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = drv.gpu_slice("n1", 8, generation=1, name="old")
    new = drv.gpu_slice("n1", 4, generation=2, name="new")
    found = _published(old, new)
    assert [d.slice for d in found.devices] == ["new"] * 4
    assert not found.problems


def test_a_pool_missing_slices_is_reported_incomplete() -> None:
    found = _published(drv.gpu_slice("n1", 2, slice_count=2))
    assert found.incomplete == ("pool gpu.nvidia.com/n1 generation 1: 1 of 2 slices published",)


def test_a_device_in_two_pools_is_a_problem() -> None:
    device = drv.gpu_device("n1", 0)
    a = drv.resource_slice("n1", [device], pool="a", name="a")
    b = drv.resource_slice("n1", [device], pool="b", name="b")
    found = _published(a, b)
    assert len(found.problems) == 1
    assert "two pools" in found.problems[0]


def _decide(
    *slices: dict[str, Any],
    labels: dict[str, str] | None = None,
    sources: list[str] | None = None,
    allocatable: int = 0,
) -> gpu.LabelDecision:
    spec = GPULabels.model_validate({"sources": sources or ["DRA"]})
    return gpu.decide(
        spec, labels or {}, allocatable, None, _published(*slices) if slices else None
    )


def test_labels_from_full_gpus() -> None:
    decision = _decide(drv.gpu_slice("n1", 8))
    assert decision.labels == {
        "schedpolicy.io/gpu-model": "H100",
        "schedpolicy.io/gpu-memory-mib": "81559",
    }
    assert decision.facts is not None
    assert decision.facts.source == "DRA"
    assert "8 device(s)" in decision.facts.detail


def test_labels_from_mig_devices_take_the_profile_memory() -> None:
    devices = [drv.gpu_device("n1", 0, *drv.A100_40[:2])] + [
        drv.mig_device("n1", 0, i, "1g.5gb", "4864Mi") for i in range(7)
    ]
    decision = _decide(drv.resource_slice("n1", devices))
    assert decision.labels == {
        "schedpolicy.io/gpu-model": "A100",
        "schedpolicy.io/gpu-memory-mib": "4864",
    }


@pytest.mark.parametrize(
    ("device", "reason"),
    [
        (drv.gpu_device("n1", 0, product=None), "unknown-model"),
        (drv.gpu_device("n1", 0, product="Graphics Device"), "unknown-model"),
        (drv.gpu_device("n1", 0, memory="eighty gigs"), "memory-implausible"),
        (drv.gpu_device("n1", 0, memory=None), "memory-implausible"),
        (drv.gpu_device("n1", 0, memory="80"), "memory-implausible"),
    ],
)
def test_bad_slices_are_refused_and_label_nothing(device: dict[str, Any], reason: str) -> None:
    decision = _decide(drv.resource_slice("n1", [device]))
    assert decision.labels == {}
    assert [r.reason for r in decision.refusals] == [reason]
    assert decision.refusals[0].source == "DRA"


def test_two_kinds_of_device_on_one_node_are_refused() -> None:
    devices = [drv.gpu_device("n1", 0), drv.gpu_device("n1", 1, *drv.A100_40[:2])]
    decision = _decide(drv.resource_slice("n1", devices))
    assert [r.reason for r in decision.refusals] == ["mixed-devices"]


def test_a_device_in_two_pools_labels_nothing() -> None:
    device = drv.gpu_device("n1", 0)
    decision = _decide(
        drv.resource_slice("n1", [device], pool="a", name="a"),
        drv.resource_slice("n1", [device], pool="b", name="b"),
    )
    assert decision.labels == {}
    assert [r.reason for r in decision.refusals] == ["device-in-two-pools"]


def test_gfd_and_dra_disagreeing_is_reported() -> None:
    gfd = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.memory": "40960"}
    decision = _decide(drv.gpu_slice("n1", 8), labels=gfd, sources=["GPUFeatureDiscovery", "DRA"])
    assert decision.labels["schedpolicy.io/gpu-model"] == "A100"
    assert decision.disagreements == (
        "DRA says H100/81559 MiB, GPUFeatureDiscovery says A100/40960 MiB;"
        " GPUFeatureDiscovery comes first",
    )


def test_gfd_and_dra_agreeing_within_tolerance() -> None:
    gfd = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81920"}
    decision = _decide(drv.gpu_slice("n1", 8), labels=gfd, sources=["GPUFeatureDiscovery", "DRA"])
    assert decision.disagreements == ()


def test_a_node_with_no_gpu_input_is_not_a_gpu_node() -> None:
    decision = _decide()
    assert decision.labels == {}
    assert "not a GPU node" in decision.explanation[0]


def test_dra_is_a_default_source_and_sources_take_four() -> None:
    assert "DRA" in GPULabels().sources
    GPULabels.model_validate(
        {"sources": ["Inventory", "GPUFeatureDiscovery", "DRA", "InstanceType"]}
    )


# ---- fill ----------------------------------------------------------------------------------


def claim(name: str, node: str, devices: list[int], extended: bool = False) -> dict[str, Any]:
    annotations = {dra.EXTENDED_CLAIM_ANNOTATION: "true"} if extended else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "annotations": annotations,
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": drv.DRIVER, "pool": node, "device": f"gpu-{i}"}
                        for i in devices
                    ]
                }
            }
        },
    }


def _view(*claims: dict[str, Any], count: int = 8) -> ClusterView:
    return snapshot.build_view(
        resource_slices=[drv.gpu_slice("n1", count)],
        resource_claims=claims,
        device_classes=drv.device_classes(),
    )


def test_share_counts_allocated_devices_of_the_classes() -> None:
    view = _view(claim("a", "n1", [0, 1]), claim("b", "n1", [5]))
    share = view.devices.share("n1", ["gpu.nvidia.com"])
    assert len(share.published) == 8
    assert [(a.claim, a.key[2]) for a in share.allocated] == [
        ("ml/a", "gpu-0"),
        ("ml/a", "gpu-1"),
        ("ml/b", "gpu-5"),
    ]
    assert share.describe().startswith("DRA 3 of 8 devices of gpu.nvidia.com (ml/a -> n1/gpu-0;")


def test_a_class_selecting_mig_devices_sees_no_full_gpus() -> None:
    view = _view(claim("a", "n1", [0]))
    share = view.devices.share("n1", ["mig.nvidia.com"])
    assert share.published == ()
    assert share.allocated == ()


def test_extended_resource_claims_are_not_counted_twice() -> None:
    view = _view(claim("a", "n1", [0]), claim("x", "n1", [1, 2], extended=True))
    share = view.devices.share("n1", ["gpu.nvidia.com"])
    assert [a.claim for a in share.allocated] == ["ml/a"]
    assert [a.key[2] for a in share.extended] == ["gpu-1", "gpu-2"]


def test_unknown_class_and_unread_selectors_say_so() -> None:
    view = _view()
    view.devices.upsert_class(
        {
            "metadata": {"name": "odd"},
            "spec": {"selectors": [{"cel": {"expression": "semver('1') == 1"}}]},
        }
    )
    share = view.devices.share("n1", ["odd", "gone"])
    assert share.published == ()
    assert share.unread == (
        "DeviceClass odd: spec.selectors[0].cel.expression: 'semver' at 0 is outside what this"
        " version evaluates (device.driver and device.attributes compared with literals)",
        "DeviceClass gone does not exist",
    )


def test_claims_naming_unlisted_devices_are_counted_apart() -> None:
    view = _view(claim("a", "n1", [0]), claim("ghost", "n1", [42]))
    assert [(a.claim, a.key[2]) for a in view.devices.unlisted()] == [("ml/ghost", "gpu-42")]
    assert len(view.devices.share("n1", ["gpu.nvidia.com"]).allocated) == 1


def test_a_claim_change_touches_the_node_of_its_devices() -> None:
    view = _view()
    assert view.devices.upsert_claim(claim("a", "n1", [0])) == {"n1"}
    assert view.devices.remove_claim("uid-a") == {"n1"}
    assert view.devices.upsert_slice(drv.gpu_slice("n1", 4)) == {"n1"}
    assert view.devices.upsert_class(drv.device_class("other")) == {"n1"}


def test_consolidation_counts_dra_devices_into_the_gpu_share() -> None:
    view = _view(claim("a", "n1", [0, 1, 2]))
    params = NodeConsolidationSignal.model_validate(
        {"points": 800, "resources": ["nvidia.com/gpu"], "deviceClasses": ["gpu.nvidia.com"]}
    )
    inputs = CostInputs(
        node_name="n1",
        allocatable={"cpu": 8000},
        device_shares={("gpu.nvidia.com",): view.devices.share("n1", ["gpu.nvidia.com"])},
    )
    scored = node_consolidation.score(params, inputs, NOW)
    points, detail, fill = scored.points, scored.detail, scored.fill
    assert points == 300  # 800 x 3/8
    assert fill is not None
    assert fill.dominant == "nvidia.com/gpu"
    assert (
        "nvidia.com/gpu 3 of 8 (0.38); DRA 3 of 8 devices of gpu.nvidia.com (ml/a -> n1/gpu-0"
        in detail
    )


def test_extended_requests_and_dra_devices_add_up() -> None:
    """A node with both a device plugin's GPUs and DRA GPUs: both count, each once."""
    share = _view(claim("a", "n1", [0]), count=4).devices.share("n1", ["gpu.nvidia.com"])
    allocatable, requested = fill.with_devices(
        "nvidia.com/gpu", {"nvidia.com/gpu": 4000}, {"nvidia.com/gpu": 2000}, share
    )
    assert (allocatable["nvidia.com/gpu"], requested["nvidia.com/gpu"]) == (8000, 3000)


def test_device_classes_need_their_resource_listed() -> None:
    with pytest.raises(SpecError, match=r"deviceResource nvidia\.com/gpu must be one of resources"):
        parse_spec(
            {
                "deletionCost": {
                    "signals": [
                        {
                            "type": "NodeConsolidation",
                            "nodeConsolidation": {
                                "resources": ["cpu"],
                                "deviceClasses": ["gpu.nvidia.com"],
                            },
                        }
                    ]
                }
            }
        )


def test_claim_record_reads_allocation_results() -> None:
    record = claim_record(claim("a", "n1", [3], extended=True))
    assert record.results == (
        dra.Allocation("ml/a", "gpu", ("gpu.nvidia.com", "n1", "gpu-3"), True),
    )


def test_a_cached_share_follows_claims_slices_and_classes() -> None:
    view = _view(claim("a", "n1", [0]))
    assert len(view.devices.share("n1", ["gpu.nvidia.com"]).allocated) == 1
    view.devices.upsert_claim(claim("b", "n1", [1]))
    assert len(view.devices.share("n1", ["gpu.nvidia.com"]).allocated) == 2
    view.devices.upsert_slice(drv.gpu_slice("n1", 4, generation=2))
    assert len(view.devices.share("n1", ["gpu.nvidia.com"]).published) == 4
    view.devices.upsert_class(drv.device_class("gpu.nvidia.com", "mig"))
    assert view.devices.share("n1", ["gpu.nvidia.com"]).published == ()
