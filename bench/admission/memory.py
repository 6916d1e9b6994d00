"""The webhook's memory under bursts: its resident set idle, then after a burst of 1,000 pod
creates and after one of 5,000 (five Deployments from 0 each at once), and its peak
(VmHWM). The webhook holds nothing per pod, so what a burst adds is buffers and the
allocator's arenas; the acceptance is idle + 20 MiB after the 5,000."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import fleet
from bench.admission.load import NAMESPACE, run_burst
from bench.admission.paths import Paths, point_at
from bench.scale import Scale
from localcluster import LocalCluster

BURSTS = (1000, 5000)  # pods, five Deployments of a fifth each


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (the peak) of a process, in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = round(int(value.split()[0]) / 1024, 1)
    return found


def clear_bursts(cluster: LocalCluster) -> None:
    """Delete the bursts' Deployments, and wait until their pods are gone."""
    cluster.kubectl("delete", "deployments", "--all", "-n", NAMESPACE, "--wait=false")

    def gone() -> bool:
        listed = cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "name")
        return not [n for n in listed.split() if "/mem-" in n]

    fleet.wait_for(gone, "the bursts' pods gone", within=900, every=3)


def webhook_memory(cluster: LocalCluster, scale: Scale, paths: Paths) -> dict[str, Any]:
    """A fresh webhook process, idle after its sync, then each burst in turn."""
    paths.stop()
    ours = paths.serving()
    point_at(paths.webhook)
    time.sleep(5)
    pid = ours.proc.pid
    out: dict[str, Any] = {"idle": memory_mib(pid)}
    try:
        for pods in BURSTS:
            burst = run_burst(cluster, replace(scale, burst_replicas=pods // 5), f"mem-{pods}")
            time.sleep(3)
            out[f"after_{pods}"] = {
                **memory_mib(pid),
                "pods_without_hints": burst["pods_without_hints"],
            }
            clear_bursts(cluster)
    finally:
        paths.webhook.unregister()
        paths.stop()
    idle = out["idle"]["VmRSS"]
    last = out[f"after_{BURSTS[-1]}"]
    out["grew_mib"] = round(max(last["VmRSS"], last["VmHWM"]) - idle, 1)
    out["goal"] = "peak RSS after the 5,000-pod burst <= idle + 20 MiB"
    return out
