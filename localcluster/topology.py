"""The declarative fake topology (topology.yaml) turned into KWOK Node manifests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_TOPOLOGY = Path(__file__).with_name("topology.yaml")
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


class TopologyError(ValueError):
    """A topology file that cannot be turned into nodes; the message names the field."""


@dataclass(frozen=True)
class InstanceType:
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]


@dataclass(frozen=True)
class FakeNode:
    name: str
    zone: str
    region: str
    instance_type: str
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    labels: Mapping[str, str] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            ZONE_LABEL: self.zone,
            REGION_LABEL: self.region,
            INSTANCE_TYPE_LABEL: self.instance_type,
            **self.labels,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            },
            "spec": {},
            "status": {"capacity": dict(self.capacity), "allocatable": dict(self.allocatable)},
        }


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TopologyError(f"{where}: expected a mapping, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


def parse(doc: Mapping[str, Any]) -> list[FakeNode]:
    region = str(doc.get("region", "local"))
    types: dict[str, InstanceType] = {}
    for name, spec in (doc.get("instanceTypes") or {}).items():
        where = f"instanceTypes.{name}"
        if not isinstance(spec, Mapping) or "allocatable" not in spec:
            raise TopologyError(f"{where}.allocatable: required")
        allocatable = _str_map(spec["allocatable"], f"{where}.allocatable")
        capacity = _str_map(spec.get("capacity", allocatable), f"{where}.capacity")
        types[str(name)] = InstanceType(capacity=capacity, allocatable=allocatable)

    nodes: list[FakeNode] = []
    seen: set[str] = set()
    for i, entry in enumerate(doc.get("nodes") or []):
        where = f"nodes[{i}]"
        for key in ("name", "zone", "instanceType"):
            if key not in entry:
                raise TopologyError(f"{where}.{key}: required")
        name = str(entry["name"])
        if name in seen:
            raise TopologyError(f"{where}.name: duplicate node name {name!r}")
        seen.add(name)
        itype = str(entry["instanceType"])
        if itype not in types:
            raise TopologyError(f"{where}.instanceType: {itype!r} is not in instanceTypes")
        base = types[itype]
        overrides = _str_map(entry.get("allocatable"), f"{where}.allocatable")
        nodes.append(
            FakeNode(
                name=name,
                zone=str(entry["zone"]),
                region=region,
                instance_type=itype,
                capacity=dict(base.capacity),
                allocatable={**base.allocatable, **overrides},
                labels=_str_map(entry.get("labels"), f"{where}.labels"),
            )
        )
    return nodes


def load(path: Path = DEFAULT_TOPOLOGY) -> list[FakeNode]:
    return parse(yaml.safe_load(path.read_text()))
