"""`schedpolicy_gpu_nodes_unlabelled{reason}` says what the label decision says, on every node
of the GPU tables and on a CPU node that publishes only non-GPU DRA devices."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from localcluster import dra_driver as drv
from schedpolicy.core.gpu import dra
from schedpolicy.core.gpu.api import GPULabels
from schedpolicy.core.gpu.label_rules import Unlabelled, decide
from schedpolicy.core.gpu.products import memory_agrees, mig_profile_mib
from schedpolicy.shell.events import Events
from schedpolicy.shell.gpu.label_sync import LabelSync
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.metrics import UNLABELLED_REASONS
from schedpolicy.view import snapshot
from schedpolicy.view.gpu.devices import slice_record
from tests.unit.test_gpu import NODES


def policy(spec: GPULabels) -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "gpus", "uid": "p-1", "generation": 1},
        "spec": {"nodeLabels": {"gpu": spec.model_dump(by_alias=True, exclude_defaults=True)}},
    }


def node(labels: dict[str, str], gpus: int) -> dict[str, Any]:
    allocatable = {"cpu": "8", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "metadata": {"name": "n1", "uid": "n-1", "resourceVersion": "1", "labels": labels},
        "status": {"allocatable": allocatable},
    }


def counted(spec: GPULabels, body: dict[str, Any], *slices: dict[str, Any]) -> dict[str, float]:
    """What the metric says after the controller's label sync has seen one node."""
    view = snapshot.build_view(policies=[policy(spec)], nodes=[body], resource_slices=slices)
    sync = LabelSync(Kube.__new__(Kube), view, Events(Kube.__new__(Kube)))
    sync.refresh("n1", view.policies())
    sync.counts()
    return {
        r: REGISTRY.get_sample_value("schedpolicy_gpu_nodes_unlabelled", {"reason": r}) or 0.0
        for r in UNLABELLED_REASONS
    }


def expected(reason: Unlabelled | None) -> dict[str, float]:
    return {r: 1.0 if r == reason else 0.0 for r in UNLABELLED_REASONS}


@pytest.mark.parametrize(
    ("spec", "labels", "gpus"), [row[1:4] for row in NODES], ids=[row[0] for row in NODES]
)
def test_the_metric_agrees_with_the_decision_on_every_table_node(
    spec: GPULabels, labels: dict[str, str], gpus: int
) -> None:
    decision = decide(spec, labels, gpus)
    assert (decision.unlabelled is None) == bool(decision.labels)
    assert counted(spec, node(labels, gpus)) == expected(decision.unlabelled)


def test_a_cpu_node_with_only_non_gpu_dra_devices_is_not_a_gpu_node() -> None:
    """A NIC or FPGA driver's slice on a CPU node: no GPU, so not `unknown-gpu`."""
    nic = drv.resource_slice("n1", [{"name": "nic-0", "attributes": {"type": {"string": "nic"}}}])
    nic["spec"]["driver"] = "nic.example.com"
    spec = GPULabels()
    published = dra.published([slice_record(nic)])
    decision = decide(spec, {}, 0, None, published)
    assert decision.unlabelled == "no-allocatable-gpus"
    assert counted(spec, node({}, 0), nic) == expected("no-allocatable-gpus")


def test_a_node_whose_gpus_no_source_names_is_unknown() -> None:
    spec = GPULabels.model_validate({"sources": ["GPUFeatureDiscovery"]})
    decision = decide(spec, {}, 4)
    assert decision.unlabelled == "unknown-gpu"
    assert counted(spec, node({}, 4)) == expected("unknown-gpu")


@pytest.mark.parametrize(
    ("profile", "mib"),
    [
        ("1g.5gb", 5120),
        ("1c.2g.10gb", 10240),  # a compute-instance profile leads
        ("3G.20GB", 20480),  # GFD upper-cases nothing, but a user's label might
        ("7g.80gb", 81920),
        ("gpu", None),
        ("1g.5gbx", None),
        ("MIG-1g.5gb", None),  # a product suffix, not a profile
    ],
)
def test_one_mig_profile_rule_for_gfd_and_dra(profile: str, mib: int | None) -> None:
    assert mig_profile_mib(profile) == mib


@pytest.mark.parametrize(
    ("a", "b", "agree"),
    [
        (15109, 16384, True),  # a T4 with ECC on against EC2's figure
        (40960, 81920, False),  # another size class
        (81920, 81920, True),
        (73728, 81920, True),  # 10% of the larger, exactly
        (73727, 81920, False),
    ],
)
def test_one_memory_tolerance_for_every_comparison(a: int, b: int, agree: bool) -> None:
    assert memory_agrees(a, b) is agree
    assert memory_agrees(b, a) is agree
