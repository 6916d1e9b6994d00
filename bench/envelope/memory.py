"""Each process's memory from /proc: resident now (VmRSS) and at its peak (VmHWM)."""

from __future__ import annotations

from pathlib import Path

from bench.convergence.process import rss_mib
from localcluster import LocalCluster

# The control plane's processes, measured for reference beside the install's own.
MEASURED = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok", "schedpolicy-scheduler")


def of(pid: int) -> dict[str, float]:
    return {"rss_mib": round(rss_mib(pid), 1), "peak_mib": round(rss_mib(pid, "VmHWM"), 1)}


def _binary(pid: int, name: str) -> int:
    """The process itself, or the descendant running `name`: the chart's scheduler runs under
    a shell that restarts it (localcluster.scheduler)."""
    if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].endswith(name.encode()):
        return pid
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        found = _binary(int(child), name)
        if found:
            return found
    return 0


def control_plane(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    out = {}
    for name in MEASURED:
        record = cluster.supervisor.get(name)
        if record is None:
            continue
        binary = "kube-scheduler" if name == "schedpolicy-scheduler" else name
        pid = _binary(record.pid, binary)
        if pid:
            out[name] = of(pid)
    return out
