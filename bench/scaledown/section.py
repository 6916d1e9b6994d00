"""B5's and B5g's sections of bench/REPORT.md."""

from __future__ import annotations

from typing import Any

from bench.charts import bars, header, row


def _skew(zones: dict[str, Any]) -> str:
    # None means the scale-down emptied a zone: no finite max/min.
    ratio = zones["max_over_min"]
    return "∞ (a zone emptied)" if ratio is None else str(ratio)


def section_b5(r: dict[str, Any]) -> list[str]:
    n, z = r["nodes_emptied"], r["zones"]
    img = bars(
        "b5-scaledown",
        "B5: nodes emptied by a scale-down",
        ["no policy", "NodeConsolidation", "ideal"],
        [n["without_policy"], n["with_policy"], n["ideal"]],
        "nodes",
    )
    return [
        "## B5: scale-down",
        f"{r['replicas']} replicas spread evenly over {r['nodes']} nodes that also run other work, scaled to"
        f" {r['replicas'] // 2} by the real ReplicaSet controller.",
        "",
        *header("", "nodes left with no replica"),
        row("no policy", n["without_policy"]),
        row("NodeConsolidation", n["with_policy"]),
        row("ideal (offline greedy)", n["ideal"]),
        "",
        f"**{r['ratio']} of ideal** (goal ≥ 0.9).",
        "",
        "Zones: 60 replicas at 30/20/10 over three zones, scaled to 30.",
        "",
        *header("", "replicas per zone", "max/min"),
        row("no policy", z["without_policy"]["per_zone"], _skew(z["without_policy"])),
        row("ZoneBalance", z["with_policy"]["per_zone"], _skew(z["with_policy"])),
        "",
        f"![B5]({img})",
    ]


def section_b5g(r: dict[str, Any]) -> list[str]:
    f, ratio = r["freed"], r["ratio"]
    img = bars(
        "b5g-gpu-scaledown",
        "B5g: GPU nodes freed by a scale-down",
        ["no policy", "CPU fill", "GPU fill", "ideal"],
        [f["no_policy"], f["cpu_fill"], f["gpu_fill"], f["ideal"]],
        "nodes with no GPU in use",
    )
    busy = sum(1 for n in r["layout"] if n["other_gpus"])
    heavy = sum(1 for n in r["layout"] if n["other_cpu"] > 2)
    met = (
        ratio["gpu_fill"] is not None and ratio["gpu_fill"] >= 0.9 and f["gpu_fill"] > f["cpu_fill"]
    )
    return [
        "## B5g: GPU scale-down",
        f"{r['nodes']} nodes of {r['gpus_per_node']} GPUs; {busy} run other GPU jobs that need little"
        f" CPU, {heavy} run CPU-heavy work with no GPU. An inference Deployment of"
        f" {r['replicas'][0]} one-GPU replicas (4 CPUs each; per-node pod capacity pins the same"
        f" placement in every case) is scaled to {r['replicas'][1]} by the real ReplicaSet"
        " controller.",
        "",
        *header("", "GPU nodes left with no GPU in use", "of ideal"),
        row("no policy", f["no_policy"], ratio["no_policy"]),
        row(
            "NodeConsolidation, `resources: [cpu]` (the default)", f["cpu_fill"], ratio["cpu_fill"]
        ),
        row("NodeConsolidation, `resources: [nvidia.com/gpu]`", f["gpu_fill"], ratio["gpu_fill"]),
        row("ideal (offline greedy over the nodes with no other GPU job)", f["ideal"], "1.0"),
        "",
        f"**GPU fill {ratio['gpu_fill']} of ideal, {f['gpu_fill']} nodes against CPU fill's"
        f" {f['cpu_fill']}** (goal ≥ 0.9 of ideal and strictly more than CPU fill:"
        f" {'met' if met else 'not met'}).",
        "",
        "What limits GPU fill: replicas on nodes of equal fill get equal costs, and for the"
        " deletions that fall inside such a tie the ReplicaSet controller's next criteria"
        " (replicas doubled up on a node, then age) do not group its choice by node, so it can"
        " split them between two nodes and free neither. The offline ideal empties one node"
        " of the tie.",
        "",
        f"![B5g]({img})",
    ]
