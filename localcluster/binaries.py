"""Where the control-plane binaries live, and which Kubernetes they are.

Everything is in .tools/bin (or $SCHEDPOLICY_TOOLS_BIN), built at the target Kubernetes
pinned in tools/kubernetes. The compatibility lane sets SCHEDPOLICY_KUBERNETES to an older
supported minor (1.35): kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
then come from that version's own directory, .tools/k8s-<minor>/bin, built from
tools/kubernetes-<minor>. The lane's nodes are KWOK's, so it needs no older kubelet.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
# What `make cluster-up` (and so `make demo`) needs: `tools/build.sh control-plane`.
REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
# The binaries of a Kubernetes release that the compatibility lane swaps for older ones.
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
COMPAT_MINORS = ("1.35",)
LANE_ENV = "SCHEDPOLICY_KUBERNETES"


class LaneError(RuntimeError):
    pass


def bin_dir() -> Path:
    return Path(os.environ.get("SCHEDPOLICY_TOOLS_BIN") or REPO / ".tools" / "bin")


def lane() -> str | None:
    """The older Kubernetes minor under test, or None for the target."""
    minor = os.environ.get(LANE_ENV) or None
    if minor is not None and minor not in COMPAT_MINORS:
        raise LaneError(
            f"{LANE_ENV}={minor}: the compatibility lanes are {', '.join(COMPAT_MINORS)}"
        )
    return minor


def kube_dir() -> Path:
    minor = lane()
    return bin_dir() if minor is None else REPO / ".tools" / f"k8s-{minor}" / "bin"


def path(name: str) -> Path:
    return (kube_dir() if name in CONTROL_PLANE else bin_dir()) / name


def missing() -> list[str]:
    return [n for n in REQUIRED if not os.access(path(n), os.X_OK)]


def kube_version() -> str:
    """The Kubernetes release the harness runs (`v1.37.2`), as its tools module pins it."""
    return pinned_kubernetes(lane())


@cache
def pinned_kubernetes(minor: str | None = None) -> str:
    """The release of a compatibility lane's tools module, or the target's (None)."""
    module = TOOLS / ("kubernetes" if minor is None else f"kubernetes-{minor}") / "go.mod"
    found = re.search(
        r"^(?:require)?\s*k8s\.io/kubernetes (v\S+)", module.read_text(), re.MULTILINE
    )
    if found is None:
        raise LaneError(f"{module} pins no k8s.io/kubernetes")
    return found.group(1)
