"""The GPUs of EC2's NVIDIA instance types: a verified source of GPU facts, and what a
node autoscaler can launch for a GPU model. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceGPUs:
    model: str
    count: int  # whole cards in one instance
    memory_mib: int  # per card


def _family(prefix: str, model: str, mib: int, sizes: Mapping[str, int]) -> dict[str, InstanceGPUs]:
    return {f"{prefix}.{size}": InstanceGPUs(model, count, mib) for size, count in sizes.items()}


# GPU count and MiB per GPU as EC2's DescribeInstanceTypes reports them (GpuInfo), for
# NVIDIA instance types only: this table knows EC2 and nothing else. Models are spelled as
# `normalize_product` spells GFD's names, so that the two sources can agree. Left out:
# p6e-gb200 (sold as UltraServers), and g6f/gr6f, whose fractional L4s EC2 lists with a
# GPU count of 0.
# fmt: off
_SINGLE = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
_ONE_TO_EIGHT = {**dict.fromkeys(_SINGLE, 1), "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}
_G7 = {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2, "24xlarge": 4, "48xlarge": 8}
INSTANCE_TYPES: Mapping[str, InstanceGPUs] = {
    **_family("p2", "K80", 12288, {"xlarge": 1, "8xlarge": 8, "16xlarge": 16}),
    **_family("g3", "M60", 8192, {"4xlarge": 1, "8xlarge": 2, "16xlarge": 4}),
    **_family("g3s", "M60", 8192, {"xlarge": 1}),
    **_family("p3", "V100", 16384, {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    **_family("p3dn", "V100", 32768, {"24xlarge": 8}),
    **_family("g4dn", "T4", 16384, {**dict.fromkeys(_SINGLE, 1), "12xlarge": 4, "metal": 8}),
    **_family("g5g", "T4G", 16384, {**dict.fromkeys(_SINGLE[:4], 1), "16xlarge": 2, "metal": 2}),
    **_family("g5", "A10G", 22888, _ONE_TO_EIGHT),
    **_family("g6", "L4", 22888, _ONE_TO_EIGHT),
    **_family("gr6", "L4", 22888, {"4xlarge": 1, "8xlarge": 1}),
    **_family("g6e", "L40S", 45776, _ONE_TO_EIGHT),
    **_family("g7", "RTX-PRO-4500-Blackwell", 32768, _G7),
    **_family("g7e", "RTX-PRO-6000-Blackwell", 98304, _G7),
    **_family("p4d", "A100", 40960, {"24xlarge": 8}),
    **_family("p4de", "A100", 81920, {"24xlarge": 8}),
    **_family("p5", "H100", 81920, {"4xlarge": 1, "48xlarge": 8}),
    **_family("p5e", "H200", 144384, {"48xlarge": 8}),
    **_family("p5en", "H200", 144384, {"48xlarge": 8}),
    **_family("p6-b200", "B200", 183359, {"48xlarge": 8}),
    **_family("p6-b300", "B300", 275040, {"48xlarge": 8}),
}
# fmt: on
