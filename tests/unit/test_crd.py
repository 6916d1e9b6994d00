from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import yaml

from localcluster.binaries import REPO
from schedpolicy.core import api
from schedpolicy.core.policy import crd

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


def test_every_field_is_described() -> None:
    root = _version()["schema"]["openAPIV3Schema"]
    for path, node in _schemas(root):
        # metadata must stay a bare object: the apiserver rejects any more schema there.
        if not path.endswith(("[]", ".*")) and path != ".metadata":
            assert node.get("description"), f"{path or '<root>'} has no description"
    for column in _version()["additionalPrinterColumns"]:
        assert column.get("description"), f"printer column {column['name']} has no description"


def _declared_extras(
    node: dict[str, Any], defs: dict[str, Any], path: str = ""
) -> Iterator[tuple[str, str, Any]]:
    """(path, key, value) for every list-type, map-key or format a model field declares."""
    for key, value in node.items():
        if key.startswith("x-kubernetes-list") or key == "format":
            yield path, key, value
    for option in node.get("anyOf", []):
        yield from _declared_extras(option, defs, path)
    if "$ref" in node:
        yield from _declared_extras(defs[node["$ref"].rsplit("/", 1)[-1]], defs, path)
    for name, child in node.get("properties", {}).items():
        yield from _declared_extras(child, defs, f"{path}.{name}")
    if "items" in node:
        yield from _declared_extras(node["items"], defs, f"{path}[]")


def _at(root: dict[str, Any], path: str) -> dict[str, Any]:
    node = root
    for part in path.replace("[]", ".[]").strip(".").split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_what_the_models_declare_survives_into_the_crd() -> None:
    # Optional[X] fields are unwrapped; what the field itself declares (a list-map
    # key, a date-time format) must not be lost on the way.
    root = _version()["schema"]["openAPIV3Schema"]
    found = 0
    for section, model in (
        ("spec", api.SchedulingPolicySpec),
        ("status", api.SchedulingPolicyStatus),
    ):
        raw = model.model_json_schema(by_alias=True, mode="validation")
        for path, key, value in _declared_extras(raw, raw.get("$defs", {}), section):
            found += 1
            assert _at(root, path).get(key) == value, f"{path}: {key} {value!r} lost"
    assert found >= 3
    conditions = root["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_names_subresources_and_columns() -> None:
    doc = yaml.safe_load(COMMITTED.read_text())
    assert doc["spec"]["scope"] == "Cluster"
    assert doc["spec"]["names"]["shortNames"] == ["spol"]
    assert doc["spec"]["names"]["categories"] == ["schedpolicy"]
    version = _version()
    assert version["subresources"] == {"status": {}}
    columns = version["additionalPrinterColumns"]
    narrow = [c["name"] for c in columns if not c.get("priority")]
    assert narrow == ["Priority", "Matched", "Costed", "Nodes", "Ready", "Age"]
    wide = [c["name"] for c in columns if c.get("priority") == 1]  # kubectl get -o wide
    assert wide == ["Conflicting", "Degraded", "Admission", "Reason"]


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


def test_the_cli_prints_the_committed_crd() -> None:
    # The acceptance check as a user runs it: `python -m schedpolicy crd | diff - crds/...`.
    printed = subprocess.run(
        [sys.executable, "-m", "schedpolicy", "crd"], check=True, capture_output=True, text=True
    ).stdout
    assert printed == COMMITTED.read_text()
    assert printed == (REPO / "chart" / "crds" / COMMITTED.name).read_text()
