"""The webhook's memory under bursts: its resident set idle, then after a burst of 1,000 pod
creates and after one of 5,000 (five Deployments from 0 each at once), and its peak
(VmHWM). The webhook holds nothing per pod, so what a burst adds is buffers and the
allocator's arenas; the acceptance is idle + 20 MiB after the 5,000."""

from __future__ import annotations

import json
import os
import signal
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import fleet
from bench.admission import heap_profiled
from bench.admission.heap_profiled import memory_mib
from bench.admission.load import NAMESPACE, run_burst
from bench.admission.paths import Paths, point_at
from bench.scale import Scale
from localcluster import LocalCluster

BURSTS = (1000, 5000)  # pods, five Deployments of a fifth each


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


def _snapshot(pid: int, into: Path, n: int) -> dict[str, float]:
    """Asks the traced webhook for its n-th snapshot; what it counted then."""
    os.kill(pid, signal.SIGUSR2)
    figures = into / f"{n}.json"
    fleet.wait_for(figures.exists, f"heap snapshot {n}", within=120, every=1)
    time.sleep(1)  # the .json lands after the .snap
    return dict(json.loads(figures.read_text()))


def _growth(before: Path, after: Path, top: int = 25) -> list[str]:
    """What the Python heap holds after a burst that it did not hold idle, by where it was
    allocated (tracemalloc's own frames left out)."""
    mine = tracemalloc.Filter(False, tracemalloc.__file__)
    old = tracemalloc.Snapshot.load(str(before)).filter_traces([mine])
    new = tracemalloc.Snapshot.load(str(after)).filter_traces([mine])
    lines = []
    for key in ("filename", "traceback"):
        lines += [f"## grown, by {key}", ""]
        for stat in new.compare_to(old, key)[:top]:
            lines.append(
                f"{stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+8d} blocks"
                f"  (now {stat.size / 2**20:.2f} MiB)"
            )
            frames = stat.traceback.format(limit=1 if key == "filename" else 8)
            lines += ["    " + f.strip() for f in frames if f.strip()]
        lines.append("")
    return lines


def heap_profile(cluster: LocalCluster, scale: Scale, paths: Paths, to: Path) -> dict[str, Any]:
    """The same bursts against a webhook under tracemalloc (heap_profiled): what the Python
    heap and malloc hold idle and after each burst, and where the heap grew, written to
    `to`. Kept apart from webhook_memory: tracing costs memory of its own."""
    paths.stop()
    into = paths.cluster.workdir / "heap"
    ours = paths.webhook.start(
        paths.log, module=heap_profiled.MODULE, env=heap_profiled.env(into), timeout=300
    )
    point_at(paths.webhook)
    time.sleep(5)
    out: dict[str, Any] = {"idle": _snapshot(ours.proc.pid, into, 0)}
    try:
        for n, pods in enumerate(BURSTS, start=1):
            run_burst(cluster, replace(scale, burst_replicas=pods // 5), f"mem-heap-{pods}")
            time.sleep(3)
            out[f"after_{pods}"] = _snapshot(ours.proc.pid, into, n)
            clear_bursts(cluster)
        out["after_cleared"] = _snapshot(ours.proc.pid, into, len(BURSTS) + 1)
    finally:
        paths.webhook.unregister()
        ours.stop()
    header = [
        "# The webhook's Python heap under bursts (tracemalloc, bench/admission/memory.py)",
        "",
        *(f"- {stage}: {figures}" for stage, figures in out.items()),
        "",
    ]
    to.parent.mkdir(exist_ok=True)
    to.write_text("\n".join(header + _growth(into / "0.snap", into / f"{len(BURSTS)}.snap")))
    return out
