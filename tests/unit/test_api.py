from __future__ import annotations

from typing import Any

import pytest
import yaml

from localcluster.binaries import REPO
from schedpolicy.core import api
from schedpolicy.core.policy.model import is_reserved_label_domain
from tests.e2e.policies import MalformedCase, malformed

EXAMPLES = sorted(
    [
        *(REPO / "examples").glob("*.yaml"),
        *(REPO / "examples").glob("karpenter/*.yaml"),
        *(REPO / "examples").glob("dra/*.yaml"),
    ]
)


@pytest.mark.parametrize("case", malformed(), ids=lambda c: c.name)
def test_operator_refuses_what_the_apiserver_refuses(case: MalformedCase) -> None:
    """Even if CEL were bypassed (an old CRD, a direct etcd write), the operator's own
    validation refuses the same spec and names the same field or its parent object."""
    with pytest.raises(api.SpecError) as err:
        api.parse_spec(case.spec or {})
    paths = [p.split(":", 1)[0] for p in err.value.problems]
    assert any(
        case.expect == p or case.expect.startswith(p + ".") or case.expect.startswith(p + "[")
        for p in paths
    ), (case.expect, err.value.problems)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_parse(path: Any) -> None:
    doc = yaml.safe_load(path.read_text())
    spec = api.parse_spec(doc["spec"])
    assert spec.deletion_cost or spec.node_labels or spec.placement


def test_defaults() -> None:
    spec = api.parse_spec(
        {
            "deletionCost": {"signals": [{"type": "NodeConsolidation"}]},
            "nodeLabels": {"gpu": {}},
            "placement": {},
        }
    )
    assert spec.priority == 0
    assert spec.deletion_cost is not None
    cost = spec.deletion_cost
    assert (cost.bucket, cost.min, cost.max, cost.take_over) == (100, -1000, 1000, False)
    assert cost.signals[0].params().points == 500
    assert spec.node_labels is not None
    assert spec.node_labels.gpu.label_prefix == "schedpolicy.io"
    assert spec.node_labels.gpu.sources == [
        "Inventory",
        "GPUFeatureDiscovery",
        "DRA",
        "InstanceType",
    ]
    assert spec.placement is not None
    assert spec.placement.scheduler_name == "schedpolicy-scheduler"


def test_wire_form_is_camel_case_without_nulls() -> None:
    spec = api.parse_spec({"placement": {"gpu": {"models": ["A100"], "minMemoryMiB": 40960}}})
    wire = spec.wire()
    assert wire["placement"]["gpu"] == {"models": ["A100"], "minMemoryMiB": 40960}
    assert "deletionCost" not in wire
    assert "nodeLabels" not in wire


@pytest.mark.parametrize(
    ("prefix", "reserved"),
    [
        ("kubernetes.io", True),
        ("node.kubernetes.io", True),
        ("k8s.io", True),
        ("x.k8s.io", True),
        ("schedpolicy.io", False),
        ("notkubernetes.io", False),
        ("k8s.io.example.com", False),
    ],
)
def test_reserved_label_domains(prefix: str, reserved: bool) -> None:
    assert is_reserved_label_domain(prefix) is reserved


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        ((), "spec"),
        (("deletionCost", "signals", 0, "type"), "spec.deletionCost.signals[0].type"),
        (("nodeLabels", "gpu", "function-after[_checks(), GPULabels]"), "spec.nodeLabels.gpu"),
    ],
)
def test_field_path(loc: tuple[int | str, ...], path: str) -> None:
    assert api.field_path(loc) == path
