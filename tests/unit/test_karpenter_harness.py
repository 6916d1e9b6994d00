"""What the harness gives Karpenter, checked before anything is applied."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from localcluster import karpenter
from localcluster.binaries import TOOLS

GOOD = yaml.safe_load(karpenter.INSTANCE_TYPES.read_text())


def broken(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(GOOD)
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


def test_the_shipped_table_parses_into_spot_and_on_demand_offerings_per_zone() -> None:
    catalog = karpenter.parse_catalog(GOOD)
    provider = catalog.provider_json()
    gpu = {t["name"]: t["resources"].get("nvidia.com/gpu") for t in provider}
    assert {"4", "8"} <= set(gpu.values())
    first = provider[0]
    assert set(first) == {"name", "architecture", "operatingSystems", "resources", "offerings"}
    offered = {tuple(r["values"][0] for r in o["requirements"]) for o in first["offerings"]}
    assert offered == {(c, z) for z in GOOD["zones"] for c in ("on-demand", "spot")}
    assert catalog.price("p4d.24xlarge", "on-demand") > catalog.price("p4d.24xlarge", "spot")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("zones",), [], "zones: a non-empty list"),
        (("instanceTypes", 1, "price", "spot"), -1, r"instanceTypes\[1\]\.price\.spot: a positive"),
        (
            ("instanceTypes", 1, "price", "spot"),
            9.0,
            r"instanceTypes\[1\]\.price\.spot: spot costs more",
        ),
        (
            ("instanceTypes", 2, "price", "reserved"),
            1.0,
            r"instanceTypes\[2\]\.price\.reserved: not a",
        ),
        (
            ("instanceTypes", 0, "resources", "memory"),
            "lots",
            r"instanceTypes\[0\]\.resources\.memory: 'lots'",
        ),
        (
            ("instanceTypes", 0, "resources", "cpu"),
            KeyError,
            r"instanceTypes\[0\]\.resources\.cpu: required",
        ),
        (
            ("instanceTypes", 3, "resources", "nvidia.com/gpu"),
            "0.5",
            r"nvidia\.com/gpu: GPUs come whole",
        ),
        (
            ("instanceTypes", 3, "name"),
            "c5.xlarge",
            r"instanceTypes\[3\]\.name: c5\.xlarge is listed twice",
        ),
        (("instanceTypes", 0, "capacity"), {}, r"instanceTypes\[0\]\.capacity: unknown field"),
    ],
)
def test_a_malformed_instance_type_table_is_refused_with_its_field_path(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    with pytest.raises(karpenter.KarpenterConfigError, match=message):
        karpenter.parse_catalog(broken(path, value))


def test_the_node_pools_pass_the_check() -> None:
    for pool in karpenter.node_pools(karpenter.parse_catalog(GOOD)):
        karpenter.check_node_pool(pool)


@pytest.mark.parametrize(
    ("labels", "requirement", "where"),
    [
        ({"schedpolicy.io/gpu-model": "A100"}, None, r"labels\[schedpolicy\.io/gpu-model\]"),
        ({"gpu.schedpolicy.io/x": "1"}, None, r"labels\[gpu\.schedpolicy\.io/x\]"),
        (None, "schedpolicy.io/gpu-memory-mib", r"requirements\[2\]\.key"),
    ],
)
def test_a_node_pool_that_would_set_our_labels_is_refused(
    labels: dict[str, str] | None, requirement: str | None, where: str
) -> None:
    (_, gpu) = karpenter.node_pools(karpenter.parse_catalog(GOOD), gpu_labels=labels)
    if requirement:
        gpu["spec"]["template"]["spec"]["requirements"].append(
            {"key": requirement, "operator": "Exists"}
        )
    with pytest.raises(karpenter.KarpenterConfigError, match=f"NodePool gpu: .*{where}"):
        karpenter.check_node_pool(gpu)


def test_other_labels_on_a_node_pool_are_fine() -> None:
    (_, gpu) = karpenter.node_pools(
        karpenter.parse_catalog(GOOD), gpu_labels={"team": "ml", "example.io/tier": "gold"}
    )
    karpenter.check_node_pool(gpu)


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("v1.15.0", True),
        ("v1.16.2", True),
        ("v2.0.0", True),
        ("v1.14.3", False),
        ("v1.13.0", False),
    ],
)
def test_a_karpenter_without_the_disruption_cost_annotation_is_refused(
    version: str, ok: bool
) -> None:
    if ok:
        karpenter.check_version(version)
        return
    with pytest.raises(
        karpenter.KarpenterConfigError, match=r"does not read karpenter\.sh/disruption-cost"
    ):
        karpenter.check_version(version)


def test_the_pinned_karpenter_is_new_enough() -> None:
    text = (TOOLS / "karpenter" / "go.mod").read_text()
    pinned = re.search(r"sigs\.k8s\.io/karpenter (v\S+)", text)
    assert pinned is not None
    karpenter.check_version(pinned.group(1))
