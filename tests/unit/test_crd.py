from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from localcluster.binaries import REPO
from schedpolicy import crd

COMMITTED = REPO / "crds" / "schedulingpolicies.schedpolicy.io.yaml"


def test_committed_crd_is_what_the_models_generate() -> None:
    assert COMMITTED.read_text() == crd.render(), "run `make crds` and commit the result"


def _schemas(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _schemas(child, f"{path}.{name}")
    if "items" in node:
        yield from _schemas(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _schemas(node["additionalProperties"], f"{path}.*")


def _version() -> dict[str, Any]:
    doc = yaml.safe_load(COMMITTED.read_text())
    (version,) = doc["spec"]["versions"]
    return dict(version)


def test_schema_is_structural() -> None:
    root = _version()["schema"]["openAPIV3Schema"]
    for path, node in _schemas(root):
        assert "type" in node, f"{path} has no type"
        for forbidden in ("$ref", "anyOf", "allOf", "oneOf", "$defs", "title"):
            assert forbidden not in node, f"{path} has {forbidden}"
        if "additionalProperties" in node:
            assert isinstance(node["additionalProperties"], dict), (
                f"{path}: boolean additionalProperties"
            )
            assert "properties" not in node, f"{path}: properties and additionalProperties"


def test_every_spec_and_status_field_is_described() -> None:
    root = _version()["schema"]["openAPIV3Schema"]
    for section in ("spec", "status"):
        for path, node in _schemas(root["properties"][section], section):
            if not path.endswith(("[]", ".*")):
                assert node.get("description"), f"{path} has no description"


def test_names_subresources_and_columns() -> None:
    doc = yaml.safe_load(COMMITTED.read_text())
    assert doc["spec"]["scope"] == "Cluster"
    assert doc["spec"]["names"]["shortNames"] == ["spol"]
    assert doc["spec"]["names"]["categories"] == ["schedpolicy"]
    version = _version()
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Priority", "Matched", "Costed", "Nodes", "Ready", "Age"]


def test_cel_rules_cover_the_cross_field_rules() -> None:
    text = COMMITTED.read_text()
    for needle in (
        "self.min <= self.max",
        "has(self.deletionCost) || has(self.nodeLabels) || has(self.placement)",
        "!self.labelPrefix.endsWith('.kubernetes.io')",
        "!self.labelPrefix.endsWith('.k8s.io')",
        "self.schedulerName.matches(",
        "(self.type == 'CapacityType') == has(self.capacityType)",
    ):
        assert needle in text, needle
    root = _version()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    weight = root["placement"]["properties"]["capacityType"]["properties"]["weight"]
    assert (weight["minimum"], weight["maximum"]) == (1, 100)
    bucket = root["deletionCost"]["properties"]["bucket"]
    assert bucket["minimum"] == 1
    assert bucket["default"] == 100
    memory = root["placement"]["properties"]["gpu"]["properties"]["minMemoryMiB"]
    assert memory["minimum"] == 0
    assert memory["exclusiveMinimum"] is True
