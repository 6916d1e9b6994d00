"""B1's lanes over one fleet, taken in turn (bench.lanes): the raw loop, the watching client
and the controller, each writing every cost from none; B2's figures from the controller's
lane, against the webhook's RSS and the floor."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.convergence import watching_client
from bench.convergence.costs import (
    NAMESPACE,
    POLICY,
    Expected,
    all_converged,
    build_fleet,
    clear_costs,
    cost_patches,
    expected_costs,
    patch_all,
)
from bench.convergence.patches import Patch
from bench.convergence.process import (
    cpu_seconds,
    floor,
    pod_events,
    rss_mib,
    start_operator,
    wait_converged,
    webhook_rss,
)
from bench.lanes import Figures, Lane, compare, medians, rounded, run_in_turn, summarise
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.audit import writes_by
from localcluster.operator_process import OperatorProcess

RAW, WATCHING, OPERATOR = "raw", "watching", "operator"


@dataclass
class Convergence:
    """What B1's lanes share: the fleet's expected costs and the patches that write them.
    Every lane starts with no cost on any pod: the costs one lane wrote are cleared before
    the next lane (or the profiled run) begins."""

    cluster: LocalCluster
    scale: Scale
    expected: Expected
    patches: list[Patch] = field(default_factory=list)
    written: bool = False  # costs are on the pods

    def fresh(self) -> None:
        if self.written:
            clear_costs(self.cluster, self.scale.write_concurrency)
        self.written = True

    def raw(self, cluster: LocalCluster, repeat: int) -> Figures:
        """The same patches from a bounded pool of coroutines, and nothing else."""
        self.fresh()
        seconds, errors = asyncio.run(
            patch_all(cluster, self.patches, self.scale.write_concurrency)
        )
        assert all_converged(cluster, self.expected), "the raw baseline did not write every cost"
        return {"seconds": seconds, "errors": errors}

    def watching(self, cluster: LocalCluster, repeat: int) -> Figures:
        """The same patches from a client that first streams every pod and keeps watching."""
        self.fresh()
        seconds, errors = asyncio.run(
            watching_client.stream_then_patch(
                str(cluster.operator_kubeconfig),
                NAMESPACE,
                self.patches,
                self.scale.write_concurrency,
            )
        )
        assert all_converged(cluster, self.expected), (
            "the watching baseline did not write every cost"
        )
        return {"seconds": seconds, "errors": errors}

    def operator(self, cluster: LocalCluster, repeat: int) -> Figures:
        """The controller, from process start until the last pod carries its final cost;
        then a restart, which must write nothing."""
        self.fresh()
        started_at = datetime.now(UTC)
        started = time.monotonic()
        operator = start_operator(cluster, self.scale, None)
        wait_converged(cluster, operator, self.expected, "the operator to converge")
        polled = time.monotonic() - started
        cpu = cpu_seconds(operator.proc.pid)
        events = pod_events(operator)
        idle = rss_mib(operator.proc.pid)
        writes = [e for e in writes_by(cluster.audit_log, since=started_at) if e.resource == "pods"]
        per_pod = Counter(e.name for e in writes)
        peak = operator.peak_rss_mib()
        return {
            "seconds": (max(e.at for e in writes) - started_at).total_seconds(),
            "seconds_polled": polled,
            "cpu_seconds": cpu,
            "pod_events": events,
            "patches": len(writes),
            "redundant_writes": sum(n - 1 for n in per_pod.values()),
            "writes_after_restart": self.restarted(operator),
            "peak_rss_mib": peak,
            "rss_after_convergence_mib": idle,
        }

    def restarted(self, operator: OperatorProcess) -> int:
        """The pod writes of a controller restarted over the converged fleet (it is
        stopped, and so is the new one)."""
        restarted_at = datetime.now(UTC)
        operator.stop()
        operator = start_operator(self.cluster, self.scale, None)
        operator.wait_for_log("view synced", timeout=300)
        time.sleep(10)
        since = writes_by(self.cluster.audit_log, since=restarted_at)
        operator.stop()
        return len([e for e in since if e.resource == "pods"])

    def memory(self, cluster: LocalCluster, repeat: int) -> Figures:
        """B2 alone: one convergence, and the controller's RSS at its end and at its peak."""
        self.fresh()
        operator = start_operator(cluster, self.scale, None)
        wait_converged(cluster, operator, self.expected, "the operator to converge")
        idle, peak = rss_mib(operator.proc.pid), operator.peak_rss_mib()
        operator.stop()
        return {"peak_rss_mib": peak, "rss_after_convergence_mib": idle}

    def profile(self, to: Path) -> None:
        """One more convergence under pyinstrument, kept apart: profiling slows the operator."""
        self.fresh()
        to.parent.mkdir(exist_ok=True)
        operator = start_operator(self.cluster, self.scale, to)
        wait_converged(self.cluster, operator, self.expected, "the profiled run")
        operator.stop()


def _fleet(cluster: LocalCluster, scale: Scale) -> Expected:
    build_fleet(cluster, scale)
    cluster.kubectl("apply", "-f", "-", objects=[POLICY])
    return expected_costs(cluster)


def run_b1_b2(
    cluster: LocalCluster, scale: Scale, out: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    expected = _fleet(cluster, scale)
    lanes = Convergence(cluster, scale, expected, cost_patches(cluster, expected))
    # Baselines first: the same patches, same concurrency, same apiserver.
    runs = run_in_turn(
        [Lane(RAW, lanes.raw), Lane(WATCHING, lanes.watching), Lane(OPERATOR, lanes.operator)],
        scale.repeats,
        cluster,
    )
    b2 = result_b2(cluster, scale, runs[OPERATOR])
    lanes.profile(out.parent / "profiles" / "b1-operator.txt")
    return result_b1(scale, len(lanes.patches), runs), b2


def run_b2(cluster: LocalCluster, scale: Scale) -> dict[str, Any]:
    """B2 alone (`--only B2`): the fleet and the controller's convergence, without B1's
    baselines, its restart check and its profile. A 30k-pod fleet starts at a few pods a
    second here, so the large point is worth measuring without the three extra converges."""
    lanes = Convergence(cluster, scale, _fleet(cluster, scale))
    runs = run_in_turn([Lane(OPERATOR, lanes.memory)], scale.repeats, cluster)
    return result_b2(cluster, scale, runs[OPERATOR])


def result_b1(scale: Scale, patches: int, runs: dict[str, list[Figures]]) -> dict[str, Any]:
    """B1's result: each lane's median run, and the baselines' seconds over the controller's."""
    raw, watching, op = (medians(runs[lane]) for lane in (RAW, WATCHING, OPERATOR))
    spreads = summarise(runs, ["seconds"])
    vs_watching = compare(spreads[WATCHING], spreads[OPERATOR], ["seconds"])
    vs_raw = compare(spreads[RAW], spreads[OPERATOR], ["seconds"])
    cpu, events = op["cpu_seconds"], op["pod_events"]
    return {
        "name": "B1 convergence",
        "scale": scale.name,
        "pods": scale.pods,
        "nodes": scale.nodes,
        "concurrency": scale.write_concurrency,
        "baseline_seconds": round(raw["seconds"], 2),
        "baseline_patches_per_second": round(patches / raw["seconds"], 1),
        "baseline_errors": raw["errors"],
        "watching_seconds": round(watching["seconds"], 2),
        "watching_patches_per_second": round(patches / watching["seconds"], 1),
        "watching_errors": watching["errors"],
        "ratio_vs_watching": vs_watching["seconds"]["ratio_of_medians"],
        "cpu_seconds": round(cpu, 2),
        "pod_events": int(events),
        "cpu_seconds_per_1000_pod_events": round(1000 * cpu / events, 3) if events else None,
        "operator_seconds": round(op["seconds"], 2),
        "operator_seconds_polled": round(op["seconds_polled"], 2),
        "operator_patches": op["patches"],
        "operator_patches_per_second": round(patches / op["seconds"], 1),
        "ratio": vs_raw["seconds"]["ratio_of_medians"],
        "redundant_writes": op["redundant_writes"],
        "writes_after_restart": op["writes_after_restart"],
        "goal": "vs watching >= 0.8, vs raw >= 0.7, 0 redundant writes, 0 after restart",
        "repeats": scale.repeats,
        # Each lane's seconds over its runs; the ratios are a baseline's over the controller's.
        "spread": rounded(spreads, 2),
        "compared": {"watching_over_operator": vs_watching, "raw_over_operator": vs_raw},
    }


def result_b2(cluster: LocalCluster, scale: Scale, runs: list[Figures]) -> dict[str, Any]:
    """B2's figures: the controller's RSS over its convergences (the median run), the
    webhook's holding the same fleet, and the floor."""
    op = medians(runs)
    rss_operator = op["peak_rss_mib"]
    hook_peak, hook_idle = webhook_rss(cluster)
    floor_idle, held, held_pods, held_nodes = floor(cluster)
    floor_mib = floor_idle + held / 2**20
    return {
        "name": "B2 memory",
        "scale": scale.name,
        "measured_on": datetime.now(UTC).date().isoformat(),
        "pods": scale.pods,
        "nodes": scale.nodes,
        "operator_peak_rss_mib": round(rss_operator, 1),
        "operator_rss_after_convergence_mib": round(op["rss_after_convergence_mib"], 1),
        "webhook_peak_rss_mib": round(hook_peak, 1),
        "webhook_idle_rss_mib": round(hook_idle, 1),
        "floor_mib": round(floor_mib, 1),
        "floor_idle_interpreter_mib": round(floor_idle, 1),
        "floor_held_bytes": held,
        "floor_held_bytes_per_pod": round(held / max(held_pods, 1)),
        "floor_pods": held_pods,
        "floor_nodes": held_nodes,
        "ratio_to_floor": round(rss_operator / floor_mib, 2),
        "goal": "controller <= 200 MiB at 10k pods, <= 4 KiB marginal per pod",
        "repeats": scale.repeats,
        "spread": rounded(
            summarise({OPERATOR: runs}, ["peak_rss_mib", "rss_after_convergence_mib"]), 1
        ),
    }
