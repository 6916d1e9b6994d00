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
from pathlib import Path

from bench import report
from bench.benchmark import Benchmark, Options, Result
from bench.charts import RESULTS
from bench.registry import BENCHMARKS, BY_TAG, of_result
from bench.replay.lane_spec import LaneError
from bench.replay.plan import PlanError
from bench.scale import SCALES
from bench.serving import load
from bench.serving.load import LoadError
from localcluster import LocalCluster
from localcluster.binaries import REPO
from localcluster.karpenter import KarpenterConfigError


def save(key: str, result: Result) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{key}.json").write_text(json.dumps(result, indent=2) + "\n")


def run_one(bench: Benchmark, options: Options) -> bool:
    """Runs it, saves its results and prints each one's headline; whether it failed."""
    t0 = time.monotonic()
    try:
        results = bench.results(options)
    except Exception as err:
        traceback.print_exc()
        save(bench.key, {"name": bench.key, "scale": options.scale.name, "error": repr(err)})
        return True
    for key, result in results.items():
        result["seconds"] = round(time.monotonic() - t0)
        save(key, result)
        owner = of_result(key)
        if owner is not None:
            print(owner.headline(result), flush=True)
    return False


def chosen(only: str) -> list[Benchmark]:
    """The benchmarks `--only` names, in the registry's order, less those another one's run
    covers."""
    wanted = {w.strip().upper() for w in only.split(",") if w.strip()} if only else None
    unknown = (wanted or set()) - set(BY_TAG)
    if unknown:
        raise SystemExit(
            f"bench: no benchmark {', '.join(sorted(unknown))}; there are {', '.join(BY_TAG)}"
        )
    picked = [b for b in BENCHMARKS if (b.tag in wanted if wanted else b.in_default_set)]
    covered = {tag for b in picked for tag in b.covers}
    return [b for b in picked if b.tag not in covered]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    default = ",".join(b.tag for b in BENCHMARKS if b.in_default_set)
    parser.add_argument("--only", default="", help=f"comma-separated subset (default {default})")
    parser.add_argument(
        "--trace", type=Path, default=load.DEFAULT_TRACE, help="B7/B7E: ServeGen's load_10min.csv"
    )
    parser.add_argument("--day", type=int, default=0, help="B7/B7E: the trace's day, from 0")
    parser.add_argument(
        "--lanes", default="", help="B7/B7E: comma-separated lanes of bench/replay/lanes.yaml"
    )
    args = parser.parse_args()
    scale = SCALES[args.scale]
    benches = chosen(args.only)
    lanes = tuple(n.strip() for n in args.lanes.split(",") if n.strip()) or None
    cluster = LocalCluster(REPO / ".cluster" / "bench")
    options = Options(cluster, scale, RESULTS, args.trace, args.day, lanes)
    started = time.monotonic()
    try:
        for bench in benches:
            if bench.check is not None:
                bench.check(options)
    except (LoadError, LaneError, KarpenterConfigError, PlanError) as err:
        print(f"bench: refused before any cluster started: {err}", file=sys.stderr)
        return 2
    print(f"bench: scale {scale.name}, {', '.join(b.tag for b in benches)}", flush=True)
    shared = any(not b.own_cluster for b in benches)
    if shared:
        print(f"bench: starting the local control plane in {cluster.workdir}", flush=True)
        cluster.up()
    failed = False
    try:
        if shared:
            cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
            cluster.kubectl(
                "wait", "--for=condition=Established", "crd/schedulingpolicies.schedpolicy.io"
            )
        for bench in benches:
            failed = run_one(bench, options) or failed
    finally:
        if shared:
            cluster.down()
    print(f"bench: report at {report.write()} after {time.monotonic() - started:.0f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
