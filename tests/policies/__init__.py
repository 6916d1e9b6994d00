"""Policy corpora shared by unit tests (the operator's own validation) and e2e tests
(the apiserver's schema and CEL rules)."""

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
