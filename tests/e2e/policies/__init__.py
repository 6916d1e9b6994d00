"""The malformed-policy corpus. It belongs to the e2e suite (the apiserver's schema
and CEL rules must reject each case, naming the field), and the unit tests reuse it
to hold the operator's own validation to the same field paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent


@dataclass(frozen=True)
class MalformedCase:
    name: str
    expect: str
    spec: Any

    def manifest(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "apiVersion": "schedpolicy.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": f"malformed-{self.name}"},
        }
        if self.spec is not None:
            doc["spec"] = self.spec
        return doc


def malformed() -> list[MalformedCase]:
    return [MalformedCase(**d) for d in yaml.safe_load_all((HERE / "malformed.yaml").read_text())]
