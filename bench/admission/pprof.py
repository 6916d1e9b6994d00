"""Where the apiserver's CPU goes, and how busy the whole machine is, while a benchmark runs.

A webhook or controller that is fast by its own clock can still see slow calls when the
apiserver, on the same two cores, is the bottleneck; these say whether it is.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import urllib.request
from pathlib import Path

from localcluster import LocalCluster


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total else 0.0


def sched_ns(pid: int) -> tuple[int, int]:
    """(on-CPU, waiting-for-a-CPU) nanoseconds of all a process's threads so far, from
    /proc/<pid>/task/*/schedstat: time runnable but not running is the machine's doing."""
    ran = waited = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            on_cpu, runqueue, _ = (int(v) for v in (task / "schedstat").read_text().split())
            ran, waited = ran + on_cpu, waited + runqueue
    return ran, waited


class ApiserverProfile:
    """A CPU profile of kube-apiserver taken in the background (its /debug/pprof, on by
    default), written as `go tool pprof -top` text."""

    def __init__(self, cluster: LocalCluster, seconds: int, to: Path) -> None:
        self.to = to
        self._raw = to.with_suffix(".pb.gz")
        url = f"{cluster.server}/debug/pprof/profile?seconds={seconds}"

        def fetch() -> None:
            with urllib.request.urlopen(
                url, context=cluster.ssl_context(), timeout=seconds + 60
            ) as r:
                self._raw.write_bytes(r.read())

        self._thread = threading.Thread(target=fetch, daemon=True)
        self._thread.start()

    def finish(self) -> None:
        self._thread.join()
        top = subprocess.run(
            ["go", "tool", "pprof", "-top", "-nodecount=35", str(self._raw)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        self.to.write_text(top)
        self._raw.unlink()
