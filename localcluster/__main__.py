"""`python -m localcluster up|down|status|leftovers|snapshot-chart` (what `make cluster-up`
and `make cluster-down` run; `leftovers` lists what a real node left on this machine;
`snapshot-chart` rewrites the chart render a cluster comes up with, after a chart change)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from localcluster import binaries, chart, hostnet
from localcluster.controlplane import DEFAULT_WORKDIR, ClusterError, LocalCluster
from localcluster.karpenter import KarpenterConfigError, KarpenterOptions


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster")
    parser.add_argument("command", choices=["up", "down", "status", "leftovers", "snapshot-chart"])
    parser.add_argument(
        "--real-node", action="store_true", help="also a kubelet node (after `make image`)"
    )
    parser.add_argument(
        "--karpenter",
        action="store_true",
        help="no fixed nodes: Karpenter (KWOK provider) launches them (after `bash tools/build.sh"
        " karpenter`)",
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args()
    cluster = LocalCluster(args.workdir)

    if args.command == "down":
        cluster.down()
        print(f"local cluster in {cluster.workdir} stopped")
        return 0
    if args.command == "snapshot-chart":
        print(f"wrote {chart.write_snapshot()}")
        return 0
    if args.command == "leftovers":
        found = hostnet.leftovers(binaries.REPO / ".cluster")
        for line in found:
            print(f"left behind: {line}")
        return 1 if found else 0
    if args.command == "status":
        up = cluster.healthy()
        for record in cluster.supervisor.records():
            print(
                f"{record.name:<25} pid {record.pid:<8} {'running' if record.alive() else 'DEAD'}"
            )
        print(f"cluster: {'healthy' if up else 'not running'}")
        return 0 if up else 1

    start = time.monotonic()
    print(
        "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok"
        f" in {cluster.workdir} ..."
    )
    try:
        if args.karpenter:
            cluster.up(nodes=[], karpenter_options=KarpenterOptions())
        else:
            cluster.up(real_node=args.real_node)
    except (ClusterError, KarpenterConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(
        f"local cluster is up in {time.monotonic() - start:.1f}s;"
        f" logs in {cluster.workdir / 'logs'}"
    )
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
