"""`python -m bench [--scale small|full] [--only B1,B3]`: what `make bench` runs.

Starts its own local control plane in .cluster/bench, runs the benchmarks, writes
bench/results/<name>.json and regenerates bench/REPORT.md. Each benchmark prints its key
figure as its last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.admission.run import run_b3, run_b3_cost, run_b3_memory
from bench.charts import RESULTS
from bench.convergence import run as convergence
from bench.envelope import run as envelope
from bench.gpu_hours import run as gpu_hours
from bench.packing import churn, dra, stream
from bench.replay.lane_spec import LaneError
from bench.replay.plan import PlanError
from bench.scale import SCALES, Scale
from bench.scaledown import gpu as gpu_scaledown
from bench.scaledown import run as scaledown
from bench.serving import load
from bench.serving import run as serving
from bench.serving.load import LoadError
from localcluster import LocalCluster
from localcluster.binaries import REPO
from localcluster.karpenter import KarpenterConfigError

Bench = Callable[[LocalCluster, Scale, Path], dict[str, Any]]


def headline(key: str, r: dict[str, Any]) -> str:
    if key == "b1-convergence":
        return (
            f"B1 ratio vs watching {r['ratio_vs_watching']}, vs raw {r['ratio']} (controller"
            f" {r['operator_patches_per_second']}/s, watching {r['watching_patches_per_second']}/s,"
            f" raw {r['baseline_patches_per_second']}/s), redundant {r['redundant_writes']},"
            f" after restart {r['writes_after_restart']}, CPU {r['cpu_seconds_per_1000_pod_events']}"
            " s per 1000 pod events"
        )
    if key == "b2-memory":
        return (
            f"B2 controller {r['operator_peak_rss_mib']} MiB, webhook {r['webhook_peak_rss_mib']} MiB,"
            f" floor {r['floor_mib']} MiB"
        )
    if key == "b3-webhook":
        b = r.get("burst") or {}
        return (
            f"B3 own p99 {r['own_p99_ms']} ms, apiserver p99 {r['webhook_p99_ms']} ms, added create"
            f" p99 {r['added_p99_ms']} ms; burst {b.get('share_under_25ms')} under 25 ms,"
            f" fail-opens {b.get('fail_opens')}, unhinted {b.get('pods_without_hints')};"
            f" compiled {r.get('compiled_gain')}"
        )
    if key == "b3m-webhook-memory":
        return f"B3m webhook RSS {r['webhook_memory']['grew_mib']} MiB over idle after the bursts"
    if key == "b3p-policy-cost":
        c = r["policy_cost"]
        return (
            f"B3p compiled {c['compiled_over_floor']} x the floor, output"
            f" {c['output_over_floor']} x, compiled {c['compiled_over_output']} x the output"
        )
    if key == "b4-packing":
        return (
            f"B4 free nodes {r['schedpolicy_profile']['free_nodes']} vs default"
            f" {r['default_profile']['free_nodes']} vs FFD {r['ffd_bound']['free_nodes']}: ratio {r['ratio']}"
        )
    if key == "b4-dra-packing":
        shapes = "; ".join(
            f"{shape}: " + ", ".join(f"{name} {lane['free_nodes']}" for name, lane in lanes.items())
            for shape, lanes in r["shapes"].items()
        )
        return f"B4-DRA free nodes {shapes} vs FFD {r['ffd_bound']['free_nodes']}"
    return _later_headline(key, r)


def _later_headline(key: str, r: dict[str, Any]) -> str:
    if key == "b4c-churn":
        lanes = r["lanes"]
        return "B4c min 8-GPU ratio " + ", ".join(
            f"{name} {lane['min_ratio_8gpu']} (mean {lane['mean_ratio_8gpu']})"
            for name, lane in lanes.items()
        )
    if key == "b5g-gpu-scaledown":
        f = r["freed"]
        return (
            f"B5g GPU nodes freed: none {f['no_policy']}, CPU fill {f['cpu_fill']}, GPU fill"
            f" {f['gpu_fill']}, ideal {f['ideal']}"
        )
    if key == "b8-envelope":
        last = r["steps"][-1]
        return (
            f"B8 {last['pods']} pods: controller peak {last['controller']['peak_mib']} MiB,"
            f" churn lag p99 {[p['watch']['lag_new_pods']['p99'] for p in r['churn'].get('phases') or [r['churn']]]} s,"
            f" wrong after {r['churn']['wrong_after']}"
        )
    if key.startswith(("b6-gpu-hours", "b7-serving", "b7e-no-eviction")):
        lanes = r["lanes"]
        return (
            key.split("-")[0].upper()
            + " "
            + "; ".join(
                f"{name}: {lane['gpu_node_hours']['median']} GPU node-h,"
                f" ${lane['dollars']['median']}, {lane['serving_pods_disrupted']['median']} serving"
                " pods disrupted"
                for name, lane in lanes.items()
            )
        )
    return (
        f"B5 nodes emptied {r['nodes_emptied']['with_policy']} vs none {r['nodes_emptied']['without_policy']}"
        f" vs ideal {r['nodes_emptied']['ideal']}: ratio {r['ratio']}"
    )


@dataclass(frozen=True)
class ServingChoice:
    """B7's and B7E's inputs from the command line: the trace, its day, and the lanes (None:
    those bench/replay/lanes.yaml gives the benchmark)."""

    trace: Path
    day: int
    lanes: tuple[str, ...] | None

    def bench(self, name: str) -> tuple[str, Bench]:
        """The result's name and the benchmark; it brings its own clusters, so the shared
        `cluster` goes unused."""

        def run(cluster: LocalCluster, scale: Scale, out: Path) -> dict[str, Any]:
            return serving.run_b7(
                b7_size(scale), out, name=name, trace=self.trace, day=self.day, lanes=self.lanes
            )

        return serving.result_name(name, self.day), run

    def check(self, scale: Scale, names: set[str]) -> None:
        """A bad trace, day, serving table or lane is refused before any cluster starts."""
        for name in sorted(names):
            serving.prepare(name, b7_size(scale), self.trace, self.day, self.lanes)


def b7_size(scale: Scale) -> str:
    return scale.name if scale.name in serving.SIZES else "full"


def save(key: str, result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{key}.json").write_text(json.dumps(result, indent=2) + "\n")


def run_convergence(cluster: LocalCluster, scale: Scale, out: Path, wanted: set[str]) -> bool:
    """B1 and B2, or B2 alone, on one fleet; whether they failed."""
    try:
        if "B1" in wanted:
            b1, b2 = convergence.run_b1_b2(cluster, scale, out)
            save("b1-convergence", b1)
            print(headline("b1-convergence", b1), flush=True)
        else:
            b2 = convergence.run_b2(cluster, scale)
        save("b2-memory", b2)
        print(headline("b2-memory", b2), flush=True)
        # One B2 point per scale: the report takes the slope between two of them.
        save(f"b2-memory-{scale.name}", b2)
    except Exception as err:
        traceback.print_exc()
        save("b1-convergence", {"name": "B1 convergence", "scale": scale.name, "error": repr(err)})
        return True
    return False


def run_each(
    cluster: LocalCluster, scale: Scale, out: Path, wanted: set[str], choice: ServingChoice
) -> bool:
    """B3 to B7, each as wanted; whether any failed."""
    runs: list[tuple[str, str, Bench]] = [
        ("B3", "b3-webhook", run_b3),
        ("B3M", "b3m-webhook-memory", run_b3_memory),
        ("B3P", "b3p-policy-cost", run_b3_cost),
        ("B4", "b4-packing", stream.run_b4),
        ("B4DRA", "b4-dra-packing", dra.run_b4_dra),
        ("B4C", "b4c-churn", churn.run_b4c),
        ("B5", "b5-scaledown", scaledown.run_b5),
        ("B5G", "b5g-gpu-scaledown", gpu_scaledown.run_b5g),
        ("B6", "b6-gpu-hours", gpu_hours.run_b6),
        ("B7", *choice.bench("B7")),
        ("B7E", *choice.bench("B7E")),
        ("B8", "b8-envelope", envelope.run_b8),
    ]
    failed = False
    for tag, key, fn in runs:
        if tag not in wanted:
            continue
        t0 = time.monotonic()
        try:
            result = fn(cluster, scale, out)
            result["seconds"] = round(time.monotonic() - t0)
            save(key, result)
            print(headline(key, result), flush=True)
        except Exception as err:
            failed = True
            traceback.print_exc()
            save(key, {"name": key, "scale": scale.name, "error": repr(err)})
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument(
        "--only", default="B1,B2,B3,B4,B4DRA,B4C,B5,B5G,B6,B7", help="comma-separated subset"
    )
    parser.add_argument(
        "--trace", type=Path, default=load.DEFAULT_TRACE, help="B7/B7E: ServeGen's load_10min.csv"
    )
    parser.add_argument("--day", type=int, default=0, help="B7/B7E: the trace's day, from 0")
    parser.add_argument(
        "--lanes", default="", help="B7/B7E: comma-separated lanes of bench/replay/lanes.yaml"
    )
    args = parser.parse_args()
    scale = SCALES[args.scale]
    wanted = {w.strip().upper() for w in args.only.split(",")}
    lanes = tuple(n.strip() for n in args.lanes.split(",") if n.strip()) or None
    choice = ServingChoice(args.trace, args.day, lanes)
    cluster = LocalCluster(REPO / ".cluster" / "bench")
    started = time.monotonic()
    failed = False
    # B6 and B7 bring clusters of their own (Karpenter's nodes only); the others share this one.
    shared = bool(wanted - {"B6", "B7", "B7E"})
    if wanted & {"B7", "B7E"}:
        try:
            choice.check(scale, wanted & {"B7", "B7E"})
        except (LoadError, LaneError, KarpenterConfigError, PlanError) as err:
            print(f"bench: refused before any cluster started: {err}", file=sys.stderr)
            return 2
    print(f"bench: scale {scale.name}, {', '.join(sorted(wanted))}", flush=True)
    if shared:
        print(f"bench: starting the local control plane in {cluster.workdir}", flush=True)
        cluster.up()
    try:
        if shared:
            cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
            cluster.kubectl(
                "wait", "--for=condition=Established", "crd/schedulingpolicies.schedpolicy.io"
            )
        if wanted & {"B1", "B2"}:
            failed = run_convergence(cluster, scale, RESULTS, wanted)
        failed = run_each(cluster, scale, RESULTS, wanted, choice) or failed
    finally:
        if shared:
            cluster.down()
    print(f"bench: report at {report.write()} after {time.monotonic() - started:.0f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
