"""GPU labels from real GPU Feature Discovery output.

Where a row's input was published (by NVIDIA or by users posting `kubectl get node -o yaml`),
the comment on it says where. NV-docs is github.com/NVIDIA/cloud-native-docs, NV-plugin is
github.com/NVIDIA/k8s-device-plugin (GFD lives there since v0.15).
"""

from __future__ import annotations

from typing import Any

import pytest

from schedpolicy.core.gpu.api import GPULabels
from schedpolicy.core.gpu.instance_table import INSTANCE_TYPES
from schedpolicy.core.gpu.label_rules import decide, parse_admitted, plan
from schedpolicy.core.gpu.patches import node_label_patch
from schedpolicy.core.gpu.products import normalize_product
from schedpolicy.core.gpu.sources import parse_memory
from schedpolicy.core.wellknown import (
    GFD_MEMORY,
    GFD_PRODUCT,
    GFD_REPLICAS,
    GFD_SHARING,
    INSTANCE_TYPE_LABEL,
    OWNED_LABELS_ANNOTATION,
)

MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"
MIG_STRATEGY = "nvidia.com/mig.strategy"


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA-A100-SXM4-80GB", "A100"),
        ("NVIDIA-A100-SXM4-40GB", "A100"),
        ("A100-SXM4-40GB", "A100"),  # NV-plugin docs/gpu-feature-discovery/README.md
        ("NVIDIA-A100-PCIE-40GB", "A100"),
        ("NVIDIA-A100-80GB-PCIe", "A100"),
        ("NVIDIA-H100-80GB-HBM3", "H100"),  # NV-docs gpu-operator/manifests/output/*.json
        ("NVIDIA-H100-PCIe", "H100"),
        ("NVIDIA-H100-NVL", "H100"),
        ("NVIDIA-H200", "H200"),
        ("NVIDIA-H200-141GB-HBM3e", "H200"),
        ("NVIDIA-GH200-480GB", "GH200"),
        ("NVIDIA-B200", "B200"),
        ("Tesla-T4", "T4"),
        ("Tesla-V100-SXM2-16GB", "V100"),
        ("Tesla-V100S-PCIE-32GB", "V100S"),
        ("NVIDIA-Tesla-K80", "K80"),
        ("NVIDIA-A10G", "A10G"),
        ("NVIDIA-A10", "A10"),
        ("NVIDIA-L4", "L4"),
        ("NVIDIA-L40S", "L40S"),
        ("NVIDIA-L40", "L40"),
        ("NVIDIA-GeForce-RTX-4090", "RTX-4090"),
        ("NVIDIA-RTX-A6000", "RTX-A6000"),
        ("Quadro-RTX-8000", "RTX-8000"),
        # What tells cards apart stays (issue 14, class 3).
        ("GeForce-GT-710", "GT-710"),  # the original GFD README's example product
        ("NVIDIA-GeForce-GTX-1660-Ti", "GTX-1660-Ti"),
        ("NVIDIA-GeForce-GTX-1660-SUPER", "GTX-1660-SUPER"),
        ("NVIDIA-GeForce-GTX-1060-6GB", "GTX-1060"),  # a user's dump, memory 6078
        ("NVIDIA-GeForce-RTX-3090-Ti", "RTX-3090-Ti"),
        ("NVIDIA-GeForce-RTX-4090-D", "RTX-4090-D"),
        ("NVIDIA-GeForce-RTX-3060-Laptop-GPU", "RTX-3060-Laptop"),
        ("Quadro-RTX-6000", "RTX-6000"),  # Turing, 24 GB
        ("NVIDIA-RTX-6000-Ada-Generation", "RTX-6000-Ada"),  # 48 GB
        ("NVIDIA-RTX-2000-Ada-Generation", "RTX-2000-Ada"),  # a user's dump, memory 16380
        ("NVIDIA-RTX-4000-SFF-Ada-Generation", "RTX-4000-SFF-Ada"),
        ("Quadro-RTX-4000", "RTX-4000"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-Blackwell"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", "RTX-PRO-6000-Blackwell"),
        ("NVIDIA-RTX-PRO-4500-Blackwell", "RTX-PRO-4500-Blackwell"),
        ("NVIDIA-TITAN-RTX", "TITAN-RTX"),
        ("NVIDIA-TITAN-X", "TITAN-X"),
        ("GeForce-GTX-TITAN-X", "GTX-TITAN-X"),
        # NVML's name for a device it cannot name (seen for early GB200 drivers).
        ("Graphics-Device", None),
        ("NVIDIA-Graphics-Device", None),
        # MIG single, time-slicing renames, vGPU profiles: the suffix is not the model.
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100"),
        ("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "H100"),
        ("NVIDIA-H100-NVL-MIG-1g.12gb", "H100"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1c.2g.10gb", "A100"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition-MIG-1g.24gb", "RTX-PRO-6000-Blackwell"),
        ("A100-SXM4-40GB-MIG-1g.5gb-SHARED", "A100"),
        ("Tesla-T4-SHARED", "T4"),  # NV-docs openshift/time-slicing-gpus-in-openshift.rst
        ("NVIDIA-GeForce-GTX-1660-Ti-SHARED", "GTX-1660-Ti"),
        ("NVIDIA-A100-SXM4-80GB-MIG-INVALID", "A100"),
        ("GRID-T4-16Q", "T4"),
        ("GRID-V100DX-8Q", "V100DX"),
        ("NVIDIA-A100-40C", "A100"),
        ("NVIDIA", None),
        ("", None),
    ],
)
def test_normalize_product(product: str, model: str | None) -> None:
    assert normalize_product(product) == model


@pytest.mark.parametrize(
    ("raw", "mib"),
    [
        ("15109", 15109),  # Tesla-T4, GFD v0.8.1
        ("256", 256),
        ("1048576", 1048576),  # 1 TiB: the most any device may claim in MiB
        ("16106127360", 15360),  # bytes, GFD v0.6.0/v0.6.1 (a T4)
        ("42505273344", 40536),  # bytes, NVIDIA/gpu-feature-discovery#26 (an A100 40GB)
        ("16106127361", 15360),  # NVML's byte totals need not be whole MiB: rounded down
        ("1048577", None),  # past 1 TiB in MiB, and less than 256 MiB in bytes
        ("268435455", None),
        ("268435456", 256),
        ("1152921504606846976", None),  # 1 EiB: more than 1 TiB in any unit
        ("255", None),
        ("0", None),
        ("-1", None),
        ("24GB", None),
        ("", None),
    ],
)
def test_memory_units(raw: str, mib: int | None) -> None:
    parsed = parse_memory(raw)
    if mib is None:
        assert isinstance(parsed, str)
        assert GFD_MEMORY in parsed
    else:
        assert not isinstance(parsed, str)
        assert parsed[0] == mib


def spec(**raw: Any) -> GPULabels:
    return GPULabels.model_validate(raw)


GFD_FIRST = spec(sources=["GPUFeatureDiscovery", "InstanceType"])
TABLE_FIRST = spec(sources=["InstanceType", "GPUFeatureDiscovery"])
TABLE_ONLY = spec(sources=["InstanceType"])

# One real node each: (id, policy, node labels, allocatable nvidia.com/gpu, labels wanted,
# reasons of the refusals that leave it bare).
NODES: list[tuple[str, GPULabels, dict[str, str], int, dict[str, str], tuple[str, ...]]] = [
    # 1. Memory in bytes. NV-docs openshift/time-slicing-gpus-in-openshift.rst: GFD v0.6.x on
    # a g4dn.xlarge, time-sliced 8 ways (capacity nvidia.com/gpu: 8).
    (
        "bytes-t4-time-sliced",
        GFD_FIRST,
        {
            GFD_PRODUCT: "Tesla-T4-SHARED",
            GFD_MEMORY: "16106127360",
            GFD_REPLICAS: "8",
            MIG_STRATEGY: "single",
            INSTANCE_TYPE_LABEL: "g4dn.xlarge",
        },
        8,
        {MODEL: "T4", MEMORY: "15360"},
        (),
    ),
    # A figure in no unit is refused; with nothing else that knows the node, no label.
    (
        "memory-in-no-unit",
        GFD_FIRST,
        {GFD_PRODUCT: "Tesla-T4", GFD_MEMORY: "1048577"},
        1,
        {},
        ("memory-implausible",),
    ),
    # ... and where the table knows the instance type, the table labels it.
    (
        "memory-in-no-unit-table-falls-back",
        GFD_FIRST,
        {GFD_PRODUCT: "Tesla-T4", GFD_MEMORY: "100", INSTANCE_TYPE_LABEL: "g4dn.xlarge"},
        1,
        {MODEL: "T4", MEMORY: "16384"},
        (),
    ),
    # 2. MPS: each client gets an equal share. Labels as NV-plugin internal/lm/resource_test.go
    # makes them under MPS (product -SHARED, replicas, sharing-strategy=mps).
    (
        "mps-a100",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-SHARED",
            GFD_MEMORY: "40536",
            GFD_REPLICAS: "4",
            GFD_SHARING: "mps",
            INSTANCE_TYPE_LABEL: "p4d.24xlarge",
        },
        32,
        {MODEL: "A100", MEMORY: "10134"},
        (),
    ),
    # A user's H100 NVL under MPS, 20 replicas (unshared the same node says 95830).
    (
        "mps-h100-nvl",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-H100-NVL-SHARED",
            GFD_MEMORY: "95830",
            GFD_REPLICAS: "20",
            GFD_SHARING: "mps",
        },
        20,
        {MODEL: "H100", MEMORY: "4791"},
        (),
    ),
    # The table's memory is a whole card too: MPS divides whichever source wins.
    (
        "mps-table-first",
        TABLE_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-SHARED",
            GFD_MEMORY: "40536",
            GFD_REPLICAS: "4",
            GFD_SHARING: "mps",
            INSTANCE_TYPE_LABEL: "p4d.24xlarge",
        },
        32,
        {MODEL: "A100", MEMORY: "10240"},
        (),
    ),
    (
        "mps-without-replicas",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-SHARED",
            GFD_MEMORY: "40536",
            GFD_SHARING: "mps",
            INSTANCE_TYPE_LABEL: "p4d.24xlarge",
        },
        32,
        {},
        ("sharing-unknown",),
    ),
    (
        "unknown-sharing-strategy",
        GFD_FIRST,
        {GFD_PRODUCT: "NVIDIA-L4", GFD_MEMORY: "23034", GFD_SHARING: "vgpu-slicing"},
        1,
        {},
        ("sharing-unknown",),
    ),
    # Time-slicing: a client can use the whole card. A user's GTX 1660 Ti, 6 replicas.
    (
        "time-sliced-gtx-1660-ti",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-GeForce-GTX-1660-Ti-SHARED",
            GFD_MEMORY: "6144",
            GFD_REPLICAS: "6",
            GFD_SHARING: "time-slicing",
        },
        6,
        {MODEL: "GTX-1660-Ti", MEMORY: "6144"},
        (),
    ),
    # A user's 2 x RTX 2000 Ada, time-sliced 3 ways: 6 allocatable.
    (
        "time-sliced-rtx-2000-ada",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-RTX-2000-Ada-Generation-SHARED",
            GFD_MEMORY: "16380",
            GFD_REPLICAS: "3",
            GFD_SHARING: "time-slicing",
        },
        6,
        {MODEL: "RTX-2000-Ada", MEMORY: "16380"},
        (),
    ),
    # The table still applies under time-slicing: 32 allocatable over 4 replicas is 8 cards.
    (
        "time-sliced-table-only",
        TABLE_ONLY,
        {GFD_REPLICAS: "4", GFD_SHARING: "time-slicing", INSTANCE_TYPE_LABEL: "p4d.24xlarge"},
        32,
        {MODEL: "A100", MEMORY: "40960"},
        (),
    ),
    # 3. Names: a placeholder is no model.
    (
        "placeholder-name",
        GFD_FIRST,
        {GFD_PRODUCT: "NVIDIA-Graphics-Device", GFD_MEMORY: "189471"},
        4,
        {},
        ("unknown-model",),
    ),
    (
        "rtx-6000-ada-is-not-quadro-rtx-6000",
        GFD_FIRST,
        {GFD_PRODUCT: "NVIDIA-RTX-6000-Ada-Generation", GFD_MEMORY: "49140"},
        2,
        {MODEL: "RTX-6000-Ada", MEMORY: "49140"},
        (),
    ),
    # 4. Fallbacks. 56 devices on an 8-card p4d, no GFD: MIG slices the table cannot size.
    (
        "more-devices-than-cards",
        TABLE_FIRST,
        {INSTANCE_TYPE_LABEL: "p4d.24xlarge"},
        56,
        {},
        ("more-devices-than-cards",),
    ),
    # GFD's invalid MIG layout: NVIDIA/gpu-operator#479 names this product; the other values
    # are what NV-plugin internal/lm/mig-strategy.go writes with it. Neither source labels.
    (
        "mig-invalid",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-A100-SXM4-80GB-MIG-INVALID",
            GFD_MEMORY: "0",
            GFD_REPLICAS: "0",
            GFD_SHARING: "",
            "nvidia.com/gpu.count": "0",
            MIG_STRATEGY: "single",
            INSTANCE_TYPE_LABEL: "p4de.24xlarge",
        },
        8,
        {},
        ("mig-invalid", "mig-invalid"),
    ),
    # 5 and what must keep working. MIG single on a p4d: slice memory, and the table, which
    # knows whole cards, stands aside instead of disagreeing.
    (
        "mig-single-table-first",
        TABLE_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            GFD_MEMORY: "4864",
            MIG_STRATEGY: "single",
            INSTANCE_TYPE_LABEL: "p4d.24xlarge",
        },
        56,
        {MODEL: "A100", MEMORY: "4864"},
        (),
    ),
    # NV-docs kubernetes/index.rst: a DGX A100 under MIG single, 7 x 1g.5gb.
    (
        "mig-single-dgx",
        GFD_FIRST,
        {
            GFD_PRODUCT: "A100-SXM4-40GB-MIG-1g.5gb",
            GFD_MEMORY: "4864",
            "nvidia.com/gpu.count": "7",
            MIG_STRATEGY: "single",
        },
        7,
        {MODEL: "A100", MEMORY: "4864"},
        (),
    ),
    # A user's H100 NVL under MIG single.
    (
        "mig-single-h100-nvl",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-H100-NVL-MIG-1g.12gb",
            GFD_MEMORY: "11008",
            GFD_REPLICAS: "1",
            MIG_STRATEGY: "single",
        },
        7,
        {MODEL: "H100", MEMORY: "11008"},
        (),
    ),
    # MIG single, time-sliced (the -SHARED rename after the profile).
    (
        "mig-single-time-sliced",
        GFD_FIRST,
        {
            GFD_PRODUCT: "A100-SXM4-40GB-MIG-1g.5gb-SHARED",
            GFD_MEMORY: "4864",
            GFD_REPLICAS: "2",
            GFD_SHARING: "time-slicing",
        },
        14,
        {MODEL: "A100", MEMORY: "4864"},
        (),
    ),
    # NV-docs gpu-operator/manifests/output/mig-mixed-node-labels.json: under MIG mixed the
    # slices are other resources, nvidia.com/gpu is 0, and the node gets no label.
    (
        "mig-mixed",
        GFD_FIRST,
        {
            GFD_PRODUCT: "NVIDIA-H100-80GB-HBM3",
            GFD_MEMORY: "81559",
            GFD_REPLICAS: "0",
            GFD_SHARING: "none",
            MIG_STRATEGY: "mixed",
            "nvidia.com/mig-1g.10gb.memory": "9984",
        },
        0,
        {},
        (),
    ),
    (
        "h100-nvl",  # a user's dump
        GFD_FIRST,
        {GFD_PRODUCT: "NVIDIA-H100-NVL", GFD_MEMORY: "95830", GFD_REPLICAS: "1"},
        1,
        {MODEL: "H100", MEMORY: "95830"},
        (),
    ),
    (
        "gh200",
        GFD_FIRST,
        {GFD_PRODUCT: "NVIDIA-GH200-480GB", GFD_MEMORY: "97871"},
        1,
        {MODEL: "GH200", MEMORY: "97871"},
        (),
    ),
    (
        "l40s",  # a user's dump
        GFD_FIRST,
        {GFD_PRODUCT: "NVIDIA-L40S", GFD_MEMORY: "46068", GFD_SHARING: "none"},
        1,
        {MODEL: "L40S", MEMORY: "46068"},
        (),
    ),
    (
        "vgpu-profile",
        GFD_FIRST,
        {GFD_PRODUCT: "GRID-T4-16Q", GFD_MEMORY: "16384"},
        1,
        {MODEL: "T4", MEMORY: "16384"},
        (),
    ),
]


@pytest.mark.parametrize(
    ("policy", "labels", "gpus", "wanted", "refused"),
    [row[1:] for row in NODES],
    ids=[row[0] for row in NODES],
)
def test_real_nodes(
    policy: GPULabels,
    labels: dict[str, str],
    gpus: int,
    wanted: dict[str, str],
    refused: tuple[str, ...],
) -> None:
    decision = decide(policy, labels, gpus)
    assert dict(decision.labels) == wanted, decision.explanation
    assert tuple(r.reason for r in decision.refusals) == refused
    # A refusal is explained, and no row here is a disagreement between sources.
    text = "\n".join(decision.explanation)
    for reason in refused:
        assert f"refused ({reason})" in text
    assert decision.disagreements == ()


def test_explanations_name_the_unit_and_the_share() -> None:
    bytes_row = decide(GFD_FIRST, {GFD_PRODUCT: "Tesla-T4", GFD_MEMORY: "16106127360"}, 1)
    assert "read as bytes: 16106127360 B = 15360 MiB" in "\n".join(bytes_row.explanation)
    mps = decide(
        GFD_FIRST,
        {GFD_PRODUCT: "NVIDIA-L4", GFD_MEMORY: "23034", GFD_REPLICAS: "2", GFD_SHARING: "mps"},
        2,
    )
    assert "MPS with 2 replicas caps each client at 1/2 of a device: 23034 -> 11517 MiB" in (
        "\n".join(mps.explanation)
    )


# EC2's own figures (DescribeInstanceTypes GpuInfo, as Karpenter's generated instance-type
# reference lists them): one row per family, the sizes whose card count differs included.
@pytest.mark.parametrize(
    ("itype", "model", "cards", "mib"),
    [
        ("p2.16xlarge", "K80", 16, 12288),
        ("g3s.xlarge", "M60", 1, 8192),
        ("g3.16xlarge", "M60", 4, 8192),
        ("p3.2xlarge", "V100", 1, 16384),
        ("p3.8xlarge", "V100", 4, 16384),
        ("p3.16xlarge", "V100", 8, 16384),
        ("p3dn.24xlarge", "V100", 8, 32768),
        ("g4dn.xlarge", "T4", 1, 16384),
        ("g4dn.12xlarge", "T4", 4, 16384),
        ("g4dn.metal", "T4", 8, 16384),
        ("g5g.16xlarge", "T4G", 2, 16384),
        ("g5.xlarge", "A10G", 1, 22888),
        ("g5.12xlarge", "A10G", 4, 22888),
        ("g5.48xlarge", "A10G", 8, 22888),
        ("g6.16xlarge", "L4", 1, 22888),
        ("g6.48xlarge", "L4", 8, 22888),
        ("gr6.8xlarge", "L4", 1, 22888),
        ("g6e.xlarge", "L40S", 1, 45776),
        ("g6e.24xlarge", "L40S", 4, 45776),
        ("g6e.48xlarge", "L40S", 8, 45776),
        ("g7.12xlarge", "RTX-PRO-4500-Blackwell", 2, 32768),
        ("g7e.48xlarge", "RTX-PRO-6000-Blackwell", 8, 98304),
        ("p4d.24xlarge", "A100", 8, 40960),
        ("p4de.24xlarge", "A100", 8, 81920),
        ("p5.4xlarge", "H100", 1, 81920),
        ("p5.48xlarge", "H100", 8, 81920),
        ("p5e.48xlarge", "H200", 8, 144384),
        ("p5en.48xlarge", "H200", 8, 144384),
        ("p6-b200.48xlarge", "B200", 8, 183359),
        ("p6-b300.48xlarge", "B300", 8, 275040),
    ],
)
def test_instance_type_table(itype: str, model: str, cards: int, mib: int) -> None:
    decision = decide(TABLE_FIRST, {INSTANCE_TYPE_LABEL: itype}, cards)
    assert decision.labels == {MODEL: model, MEMORY: str(mib)}
    assert decision.facts is not None
    assert decision.facts.source == "InstanceType"
    # One device more than the type has cards is slices or sharing: the table refuses.
    assert decide(TABLE_FIRST, {INSTANCE_TYPE_LABEL: itype}, cards + 1).labels == {}


def test_table_models_are_spelled_as_gfd_names_them() -> None:
    # Otherwise a GFD-first and a table-first policy would label one card two ways.
    for itype, entry in INSTANCE_TYPES.items():
        assert normalize_product(f"NVIDIA-{entry.model}") == entry.model, itype


def test_unknown_instance_type_and_no_gfd_gives_no_labels() -> None:
    decision = decide(TABLE_FIRST, {INSTANCE_TYPE_LABEL: "m5.xlarge"}, 1)
    assert decision.labels == {}
    assert decision.refusals == ()
    assert "no source knows" in decision.explanation[-1]


def test_gfd_first() -> None:
    labels = {
        GFD_PRODUCT: "NVIDIA-H100-80GB-HBM3",
        GFD_MEMORY: "81559",
        INSTANCE_TYPE_LABEL: "p5.48xlarge",
    }
    decision = decide(GFD_FIRST, labels, 8)
    assert decision.labels == {MODEL: "H100", MEMORY: "81559"}
    assert decision.disagreements == ()  # 81559 vs 81920 MiB is measurement, not disagreement


@pytest.mark.parametrize(
    ("product", "memory", "itype", "disagree"),
    [
        ("Tesla-T4", "15109", "g4dn.xlarge", False),  # ECC keeps 1/16 of a T4 back
        ("NVIDIA-A10G", "23028", "g5.xlarge", False),
        ("NVIDIA-L40S", "46068", "g6e.xlarge", False),
        ("NVIDIA-A100-SXM4-40GB", "40536", "p4d.24xlarge", False),
        ("NVIDIA-A100-SXM4-40GB", "40536", "p4de.24xlarge", True),  # the 80 GB type
        ("NVIDIA-L4", "23034", "g5.xlarge", True),  # another model
    ],
)
def test_what_counts_as_sources_disagreeing(
    product: str, memory: str, itype: str, disagree: bool
) -> None:
    labels = {GFD_PRODUCT: product, GFD_MEMORY: memory, INSTANCE_TYPE_LABEL: itype}
    assert bool(decide(GFD_FIRST, labels, 1).disagreements) is disagree


def test_mig_devices_get_their_own_memory() -> None:
    labels = {
        GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        GFD_MEMORY: "4864",
        INSTANCE_TYPE_LABEL: "p4d.24xlarge",
    }
    decision = decide(GFD_FIRST, labels, 56)
    assert decision.labels == {MODEL: "A100", MEMORY: "4864"}
    assert "MIG device 1g.5gb" in "\n".join(decision.explanation)
    # The table's 40960 MiB is the whole card's: it stands aside, which is no disagreement.
    assert decision.disagreements == ()
    without_memory = decide(GFD_FIRST, {GFD_PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-2g.10gb"}, 8)
    assert without_memory.labels[MEMORY] == "10240"
    # A memory label with the whole card's figure never beats the slice's own size.
    card = decide(GFD_FIRST, {**labels, GFD_MEMORY: "40960"}, 56)
    assert card.labels == {MODEL: "A100", MEMORY: "5120"}


def test_precedence_and_reported_disagreement() -> None:
    labels = {GFD_PRODUCT: "NVIDIA-A10G", GFD_MEMORY: "23028", INSTANCE_TYPE_LABEL: "p5.48xlarge"}
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
    labels = {GFD_PRODUCT: "NVIDIA-A10G", GFD_MEMORY: "23028", INSTANCE_TYPE_LABEL: "g5.12xlarge"}
    decision = decide(GFD_FIRST, labels, gpus)
    assert decision.labels == {}
    assert "not a GPU node" in decision.explanation[0]


def test_custom_prefix() -> None:
    decision = decide(
        spec(labelPrefix="gpu.example.com", sources=["InstanceType"]),
        {INSTANCE_TYPE_LABEL: "g5.xlarge"},
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
    decision = decide(bypassed, {INSTANCE_TYPE_LABEL: "g5.xlarge"}, 1)
    assert decision.labels == {}
    assert decision.error is not None
    # And the planner drops such keys whatever it is handed.
    change = plan({"node.kubernetes.io/gpu-model": "A10G"}, {}, {}, {}, allow_overwrite=True)
    assert change.empty


@pytest.mark.parametrize(
    ("admitted", "labelled"),
    [
        (None, True),
        (frozenset({"schedpolicy.io"}), True),
        (frozenset({"gpu.example.com", "schedpolicy.io"}), True),
        (frozenset({"example.com"}), False),
        (frozenset({"gpus.schedpolicy.io"}), False),
    ],
)
def test_a_prefix_the_guard_does_not_admit_is_not_labelled(
    admitted: frozenset[str] | None, labelled: bool
) -> None:
    decision = decide(
        spec(sources=["InstanceType"]), {INSTANCE_TYPE_LABEL: "g5.xlarge"}, 1, admitted
    )
    assert bool(decision.labels) is labelled
    assert (decision.error is None) is labelled
    if not labelled:
        assert decision.error is not None
        assert "schedpolicy.io is not one the admission guard lets" in decision.error


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("schedpolicy.io", {"schedpolicy.io"}),
        (" schedpolicy.io , gpu.example.com,", {"schedpolicy.io", "gpu.example.com"}),
        ("", "at least one label prefix"),
        (" , ", "at least one label prefix"),
        ("Schedpolicy.io", "'Schedpolicy.io' is not a DNS subdomain"),
        ("schedpolicy.io/x", "is not a DNS subdomain"),
        ("node.kubernetes.io", "node.kubernetes.io is reserved for Kubernetes"),
        ("k8s.io", "k8s.io is reserved for Kubernetes"),
    ],
)
def test_parse_admitted(raw: str, parsed: set[str] | str) -> None:
    if isinstance(parsed, set):
        assert parse_admitted(raw) == parsed
    else:
        with pytest.raises(ValueError, match=parsed):
            parse_admitted(raw)


OURS = {MODEL: frozenset({"schedpolicy"}), MEMORY: frozenset({"schedpolicy"})}
WANT = {MODEL: "A100", MEMORY: "40960"}


def test_plan_new_labels_are_set_and_owned() -> None:
    change = plan(WANT, {}, {}, {}, allow_overwrite=False)
    assert dict(change.set) == WANT
    assert change.owned == (MEMORY, MODEL)
    assert node_label_patch("uid-1", change) == {
        "metadata": {
            "uid": "uid-1",
            "labels": WANT,
            "annotations": {OWNED_LABELS_ANNOTATION: f"{MEMORY},{MODEL}"},
        }
    }


def test_plan_nothing_to_do() -> None:
    owned = {OWNED_LABELS_ANNOTATION: f"{MEMORY},{MODEL}"}
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
    change = plan(
        {}, labels, {OWNED_LABELS_ANNOTATION: f"{MEMORY},{MODEL}"}, OURS, allow_overwrite=False
    )
    assert change.remove == (MEMORY, MODEL)
    assert change.owned == ()
    assert node_label_patch("u", change) == {
        "metadata": {
            "uid": "u",
            "labels": {MEMORY: None, MODEL: None},
            "annotations": {OWNED_LABELS_ANNOTATION: None},
        }
    }


def test_plan_a_label_someone_took_over_is_theirs() -> None:
    labels = {MODEL: "mine-now", MEMORY: "40960"}
    managers = {MODEL: frozenset({"kubectl-label"}), MEMORY: frozenset({"schedpolicy"})}
    change = plan(
        {}, labels, {OWNED_LABELS_ANNOTATION: f"{MEMORY},{MODEL}"}, managers, allow_overwrite=False
    )
    assert change.remove == (MEMORY,)
