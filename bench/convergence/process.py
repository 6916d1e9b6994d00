"""The controller and the webhook as processes: started, waited on until the fleet
converges, and measured from /proc (CPU, RSS) and their own metrics."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import fleet
from bench.convergence import profiled
from bench.convergence.costs import Expected, all_converged
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess, controller
from localcluster.webhook import LoopbackWebhook


def start_operator(cluster: LocalCluster, scale: Scale, profile: Path | None) -> OperatorProcess:
    """The controller with the scale's write concurrency; under pyinstrument
    (bench.convergence.profiled) writing to `profile` when one is given."""
    concurrency = f"--write-concurrency={scale.write_concurrency}"
    if profile is None:
        return controller(cluster, concurrency)
    return controller(cluster, concurrency, module=profiled.MODULE, env=profiled.env(profile))


def wait_converged(
    cluster: LocalCluster, operator: OperatorProcess, expected: Expected, what: str
) -> None:
    """Until every pod carries its expected cost.

    The operator's own write counter is the cheap probe, scraped every second; the pods
    are listed only once it says it is done. Listing 10k pods every second would load the
    apiserver during the operator's run but not during the baselines', which are timed in
    process, and so make the comparison unfair.
    """

    def done() -> bool:
        try:
            ok = operator.metric("schedpolicy_cost_writes_total", result="ok") or 0
        except OSError:  # not serving its metrics yet
            return False
        return ok >= len(expected) and all_converged(cluster, expected)

    fleet.wait_for(done, what, within=3600, every=1)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pod_events(operator: OperatorProcess) -> float:
    return sum(
        operator.metric("schedpolicy_watch_events_total", kind="pods", type=t) or 0
        for t in ("ADDED", "MODIFIED", "DELETED")
    )


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def webhook_rss(cluster: LocalCluster) -> tuple[float, float]:
    """(peak, idle after sync) RSS of `schedpolicy webhook` holding this cluster's view."""
    # Plain HTTP and no /metrics: the view and the server, nothing else.
    loopback = LoopbackWebhook(cluster, cluster.workdir / "bench-webhook-rss-pki", "bench-rss")
    log = cluster.workdir / "logs" / "schedpolicy-webhook.log"
    hook = loopback.start(log, tls=False, metrics=False, timeout=300)
    try:
        time.sleep(2)
        return hook.peak_rss_mib(), rss_mib(hook.proc.pid)
    finally:
        hook.stop()


def floor(cluster: LocalCluster) -> tuple[float, int, int, int]:
    """(idle interpreter MiB, encoded record bytes, pods, nodes), from floor.py."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.convergence.floor", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    idle, held, pods, nodes = proc.stdout.strip().splitlines()[-1].split()
    return float(idle), int(held), int(pods), int(nodes)
