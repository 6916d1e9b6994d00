from __future__ import annotations

from typing import Any

import pytest

from schedpolicy.api import GPULabels
from schedpolicy.gpu import (
    GFD_MEMORY,
    GFD_PRODUCT,
    INSTANCE_TYPE,
    OWNED_ANNOTATION,
    decide,
    normalize_product,
    plan,
)

MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA-A100-SXM4-80GB", "A100"),
        ("NVIDIA-A100-SXM4-40GB", "A100"),
        ("NVIDIA-A100-PCIE-40GB", "A100"),
        ("NVIDIA-A100-80GB-PCIe", "A100"),
        ("NVIDIA-H100-80GB-HBM3", "H100"),
        ("NVIDIA-H100-PCIe", "H100"),
        ("NVIDIA-H100-NVL", "H100"),
        ("NVIDIA-H200", "H200"),
        ("NVIDIA-H200-141GB-HBM3e", "H200"),
        ("NVIDIA-GH200-480GB", "GH200"),
        ("NVIDIA-B200", "B200"),
        ("Tesla-T4", "T4"),
        ("Tesla-V100-SXM2-16GB", "V100"),
        ("NVIDIA-Tesla-K80", "K80"),
        ("NVIDIA-A10G", "A10G"),
        ("NVIDIA-A10", "A10"),
        ("NVIDIA-L4", "L4"),
        ("NVIDIA-L40S", "L40S"),
        ("NVIDIA-L40", "L40"),
        ("NVIDIA-GeForce-RTX-4090", "RTX-4090"),
        ("NVIDIA-RTX-A6000", "RTX-A6000"),
        ("Quadro-RTX-8000", "RTX-8000"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100"),
        ("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "H100"),
        ("NVIDIA", None),
        ("", None),
    ],
)
def test_normalize_product(product: str, model: str | None) -> None:
    assert normalize_product(product) == model


def spec(**raw: Any) -> GPULabels:
    return GPULabels.model_validate(raw)


GFD_FIRST = spec(sources=["GPUFeatureDiscovery", "InstanceType"])
TABLE_FIRST = spec(sources=["InstanceType", "GPUFeatureDiscovery"])


@pytest.mark.parametrize(
    ("itype", "model", "mib"),
    [
        ("g4dn.xlarge", "T4", 16384),
        ("g5.12xlarge", "A10G", 22888),
        ("g6.48xlarge", "L4", 22888),
        ("g6e.12xlarge", "L40S", 45776),
        ("p4d.24xlarge", "A100", 40960),
        ("p4de.24xlarge", "A100", 81920),
        ("p5.48xlarge", "H100", 81920),
        ("p5e.48xlarge", "H200", 144384),
        ("p5en.48xlarge", "H200", 144384),
    ],
)
def test_instance_type_table(itype: str, model: str, mib: int) -> None:
    decision = decide(TABLE_FIRST, {INSTANCE_TYPE: itype}, 8)
    assert decision.labels == {MODEL: model, MEMORY: str(mib)}
    assert decision.facts is not None
    assert decision.facts.source == "InstanceType"


def test_unknown_instance_type_and_no_gfd_gives_no_labels() -> None:
    decision = decide(TABLE_FIRST, {INSTANCE_TYPE: "m5.xlarge"}, 1)
    assert decision.labels == {}
    assert "no source knows" in decision.explanation[-1]


def test_gfd_first() -> None:
    labels = {
        GFD_PRODUCT: "NVIDIA-H100-80GB-HBM3",
        GFD_MEMORY: "81559",
        INSTANCE_TYPE: "p5.48xlarge",
    }
    decision = decide(GFD_FIRST, labels, 8)
    assert decision.labels == {MODEL: "H100", MEMORY: "81559"}
    assert decision.disagreements == ()  # 81559 vs 81920 MiB is measurement, not disagreement


def test_mig_devices_get_their_own_memory() -> None:
    labels = {
        GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        GFD_MEMORY: "4864",
        INSTANCE_TYPE: "p4d.24xlarge",
    }
    decision = decide(GFD_FIRST, labels, 56)
    assert decision.labels == {MODEL: "A100", MEMORY: "4864"}
    assert "MIG device 1g.5gb" in "\n".join(decision.explanation)
    # The table's 40960 MiB is the whole card's; it is reported, never used.
    assert decision.disagreements
    without_memory = decide(GFD_FIRST, {GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-2g.10gb"}, 8)
    assert without_memory.labels[MEMORY] == "10240"
    # A memory label with the whole card's figure never beats the slice's own size.
    card = decide(GFD_FIRST, {**labels, GFD_MEMORY: "40960"}, 56)
    assert card.labels == {MODEL: "A100", MEMORY: "5120"}


def test_precedence_and_reported_disagreement() -> None:
    labels = {GFD_PRODUCT: "NVIDIA-A10G", GFD_MEMORY: "23028", INSTANCE_TYPE: "p5.48xlarge"}
    assert decide(GFD_FIRST, labels, 4).labels == {MODEL: "A10G", MEMORY: "23028"}
    table = decide(TABLE_FIRST, labels, 4)
    assert table.labels == {MODEL: "H100", MEMORY: "81920"}
    assert len(table.disagreements) == 1
    assert "GPUFeatureDiscovery says A10G/23028" in table.disagreements[0]


def test_inventory_wins_when_listed_first() -> None:
    s = spec(
        sources=["Inventory", "GPUFeatureDiscovery"],
        inventory=[
            {"nodeSelector": {"matchLabels": {"rack": "r7"}}, "model": "H100", "memoryMiB": 81000}
        ],
    )
    assert decide(
        s, {"rack": "r7", GFD_PRODUCT: "NVIDIA-H100-PCIe", GFD_MEMORY: "81559"}, 8
    ).labels == {
        MODEL: "H100",
        MEMORY: "81000",
    }
    assert (
        decide(s, {"rack": "r8", GFD_PRODUCT: "NVIDIA-H100-PCIe", GFD_MEMORY: "81559"}, 8).labels[
            MEMORY
        ]
        == "81559"
    )


@pytest.mark.parametrize("gpus", [0, -1])
def test_no_allocatable_gpus_no_labels(gpus: int) -> None:
    labels = {GFD_PRODUCT: "NVIDIA-A10G", GFD_MEMORY: "23028", INSTANCE_TYPE: "g5.12xlarge"}
    decision = decide(GFD_FIRST, labels, gpus)
    assert decision.labels == {}
    assert "not a GPU node" in decision.explanation[0]


def test_custom_prefix() -> None:
    decision = decide(
        spec(labelPrefix="gpu.example.com", sources=["InstanceType"]),
        {INSTANCE_TYPE: "g5.xlarge"},
        1,
    )
    assert set(decision.labels) == {"gpu.example.com/gpu-model", "gpu.example.com/gpu-memory-mib"}


def test_reserved_prefix_refused_even_without_cel() -> None:
    bypassed = GPULabels.model_construct(
        label_prefix="node.kubernetes.io",
        sources=["InstanceType"],
        inventory=None,
        node_selector=None,
        allow_overwrite=True,
    )
    decision = decide(bypassed, {INSTANCE_TYPE: "g5.xlarge"}, 1)
    assert decision.labels == {}
    assert decision.error is not None
    # And the planner drops such keys whatever it is handed.
    change = plan({"node.kubernetes.io/gpu-model": "A10G"}, {}, {}, {}, allow_overwrite=True)
    assert change.empty


OURS = {MODEL: frozenset({"schedpolicy"}), MEMORY: frozenset({"schedpolicy"})}
WANT = {MODEL: "A100", MEMORY: "40960"}


def test_plan_new_labels_are_set_and_owned() -> None:
    change = plan(WANT, {}, {}, {}, allow_overwrite=False)
    assert dict(change.set) == WANT
    assert change.owned == (MEMORY, MODEL)
    assert change.patch("uid-1") == {
        "metadata": {
            "uid": "uid-1",
            "labels": WANT,
            "annotations": {OWNED_ANNOTATION: f"{MEMORY},{MODEL}"},
        }
    }


def test_plan_nothing_to_do() -> None:
    owned = {OWNED_ANNOTATION: f"{MEMORY},{MODEL}"}
    assert plan(WANT, WANT, owned, OURS, allow_overwrite=False).empty


def test_plan_foreign_label_is_left_alone_unless_overwrite() -> None:
    labels = {MODEL: "custom"}
    kept = plan(WANT, labels, {}, {MODEL: frozenset({"kubectl-label"})}, allow_overwrite=False)
    assert MODEL not in kept.set
    assert kept.set == {MEMORY: "40960"}
    assert kept.conflicts == (f"{MODEL}=custom was set by someone else; wanted A100",)
    taken = plan(WANT, labels, {}, {MODEL: frozenset({"kubectl-label"})}, allow_overwrite=True)
    assert dict(taken.set) == WANT


def test_plan_removes_only_our_labels() -> None:
    labels = {MODEL: "A100", MEMORY: "40960", "schedpolicy.io/other": "x"}
    change = plan({}, labels, {OWNED_ANNOTATION: f"{MEMORY},{MODEL}"}, OURS, allow_overwrite=False)
    assert change.remove == (MEMORY, MODEL)
    assert change.owned == ()
    assert change.patch("u") == {
        "metadata": {
            "uid": "u",
            "labels": {MEMORY: None, MODEL: None},
            "annotations": {OWNED_ANNOTATION: None},
        }
    }


def test_plan_a_label_someone_took_over_is_theirs() -> None:
    labels = {MODEL: "mine-now", MEMORY: "40960"}
    managers = {MODEL: frozenset({"kubectl-label"}), MEMORY: frozenset({"schedpolicy"})}
    change = plan(
        {}, labels, {OWNED_ANNOTATION: f"{MEMORY},{MODEL}"}, managers, allow_overwrite=False
    )
    assert change.remove == (MEMORY,)
