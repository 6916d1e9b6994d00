"""Where the control-plane binaries live: .tools/bin, or $SCHEDPOLICY_TOOLS_BIN."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "helm",
)


def bin_dir() -> Path:
    return Path(os.environ.get("SCHEDPOLICY_TOOLS_BIN") or REPO / ".tools" / "bin")


def path(name: str) -> Path:
    return bin_dir() / name


def missing() -> list[str]:
    return [n for n in REQUIRED if not os.access(path(n), os.X_OK)]
