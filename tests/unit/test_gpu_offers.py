"""What can take a placement.gpu policy's pods: the verified table's instance types a node
autoscaler may launch, the labelled nodes that match, and the Provisionable condition."""

from __future__ import annotations

import pytest

from schedpolicy.core.placement.gpu_offers import (
    GPUSupply,
    instance_types_for,
    labelled_matches,
    launch_term,
)
from schedpolicy.core.policy.status import Observation, verdicts

MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"


@pytest.mark.parametrize(
    ("models", "least", "types"),
    [
        (["A100"], 1, ("p4d.24xlarge", "p4de.24xlarge")),
        (["A100"], 40960, ("p4d.24xlarge", "p4de.24xlarge")),
        (["A100"], 40961, ("p4de.24xlarge",)),
        (["A100", "H100"], 81920, ("p4de.24xlarge", "p5.48xlarge", "p5.4xlarge")),
        (["H200"], 1, ("p5e.48xlarge", "p5en.48xlarge")),
        (["a100"], 1, ()),  # models compare exactly, as the label term does
        (["MI300X"], 1, ()),
        (["A100"], 200_000, ()),
    ],
)
def test_instance_types_that_hold_the_gpus_asked_for(
    models: list[str], least: int, types: tuple[str, ...]
) -> None:
    assert instance_types_for(models, least) == types


def test_the_launch_term_names_only_what_karpenter_knows_or_allows_undefined() -> None:
    # instance-type and karpenter.sh/nodepool are well-known to Karpenter; on our own label
    # only DoesNotExist (or NotIn) passes its check for an undefined key.
    assert launch_term(("p4d.24xlarge",), MODEL) == [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p4d.24xlarge"]},
        {"key": "karpenter.sh/nodepool", "operator": "Exists"},
        {"key": MODEL, "operator": "DoesNotExist"},
    ]


@pytest.mark.parametrize(
    ("labels", "matches"),
    [
        ({MODEL: "A100", MEMORY: "40960"}, True),
        ({MODEL: "A100", MEMORY: "40959"}, False),
        ({MODEL: "H100", MEMORY: "81920"}, False),
        ({MODEL: "A100"}, False),
        ({MODEL: "A100", MEMORY: "lots"}, False),
        ({}, False),
    ],
)
def test_labelled_nodes_match_as_the_label_term_does(labels: dict[str, str], matches: bool) -> None:
    assert labelled_matches(labels, MODEL, MEMORY, ["A100"], 40960) is matches


@pytest.mark.parametrize(
    ("types", "labelled", "status", "reason", "says"),
    [
        (("p4d.24xlarge",), 0, "True", "InstanceTypesKnown", "p4d.24xlarge"),
        (("p4d.24xlarge",), 3, "True", "InstanceTypesKnown", "3 labelled node(s)"),
        ((), 2, "True", "LabelledNodesOnly", "Karpenter cannot launch more"),
        ((), 0, "False", "NoInstanceType", "stay Pending"),
    ],
)
def test_the_provisionable_condition(
    types: tuple[str, ...], labelled: int, status: str, reason: str, says: str
) -> None:
    supply = GPUSupply(("A100",), 40960, types, labelled)
    found = {v.type: v for v in verdicts(Observation("p", 1, gpu_supply=supply))}
    assert (found["Provisionable"].status, found["Provisionable"].reason) == (status, reason)
    assert says in found["Provisionable"].message
    assert "A100 with at least 40960 MiB" in found["Provisionable"].message


def test_no_provisionable_condition_without_a_gpu_placement() -> None:
    assert "Provisionable" not in {v.type for v in verdicts(Observation("p", 1))}
