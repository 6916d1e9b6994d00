"""B4's, B4-DRA's and B4c's sections of bench/REPORT.md."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt

from bench.charts import bars, header, row, save


def section_b4(r: dict[str, Any]) -> list[str]:
    ours, default, bound = r["schedpolicy_profile"], r["default_profile"], r["ffd_bound"]
    img = bars(
        "b4-packing",
        "B4: fully free 8-GPU nodes",
        ["default profile", "schedpolicy", "FFD bound"],
        [default["free_nodes"], ours["free_nodes"], bound["free_nodes"]],
        "nodes",
    )
    return [
        "## B4: GPU packing",
        f"{r['pods']} pods (1/2/4/8 GPUs, seed {r['seed']}, {r['gpus_requested']} GPUs) on"
        f" {r['nodes']} nodes of 8 GPUs, the same stream through each profile of the real kube-scheduler.",
        "",
        *header("", "free nodes", "8-GPU pods still placeable", "pending pods"),
        *(
            row(name, o["free_nodes"], o["placeable_8gpu_pods"], o["pending_pods"])
            for name, o in (
                ("default profile", default),
                ("schedpolicy-scheduler", ours),
                ("first-fit-decreasing (offline)", bound),
            )
        ),
        "",
        f"**{r['ratio']} of the bound** (default profile: {r['default_ratio']}); goal ≥ 0.95 and better than default.",
        "",
        f"![B4]({img})",
    ]


B4_DRA_LANES = {
    "default_claims": "default profile, ResourceClaims",
    "ours_claims": "schedpolicy-scheduler, ResourceClaims",
    "default_extended": "default profile, nvidia.com/gpu via extendedResourceName",
    "ours_extended": "schedpolicy-scheduler, nvidia.com/gpu via extendedResourceName",
}


B4_DRA_SHAPES = {
    "cpu_10m": "10m of CPU a pod, as in B4",
    "cpu_per_gpu": "10 cores of CPU per GPU",
}


def section_b4_dra(r: dict[str, Any]) -> list[str]:
    bound = r["ffd_bound"]
    shapes = r["shapes"]
    per_gpu = shapes.get("cpu_per_gpu") or next(iter(shapes.values()))
    img = bars(
        "b4-dra-packing",
        "B4-DRA: fully free 8-GPU nodes (10 cores per GPU)",
        ["default/claims", "ours/claims", "default/ext", "ours/ext", "FFD"][: len(per_gpu) + 1],
        [*(lane["free_nodes"] for lane in per_gpu.values()), bound["free_nodes"]],
        "nodes",
    )
    rows = [
        f"| {B4_DRA_SHAPES.get(shape, shape)} | {B4_DRA_LANES.get(k, k)} | {lane['free_nodes']}"
        f" | {lane['placeable_8gpu_pods']} | {lane['pending_pods']} | **{lane['ratio']}**"
        f" | {lane['seconds_to_place']} |"
        for shape, lanes in shapes.items()
        for k, lane in lanes.items()
    ]
    return [
        "## B4-DRA: GPU packing when the GPUs are DRA devices",
        f"B4's stream ({r['pods']} pods, 1/2/4/8 GPUs, seed {r['seed']}, {r['gpus_requested']}"
        f" GPUs) on {r['nodes']} nodes whose 8 GPUs only their ResourceSlices publish (no device"
        " plugin), through the real kube-scheduler, one lane after another on the same nodes,"
        " with two CPU requests per pod.",
        "",
        "| pods' CPU | lane | free nodes | 8-GPU pods still placeable | pending pods | of FFD"
        " | s to place |",
        "|---|---|---|---|---|---|---|",
        *rows,
        f"| | first-fit-decreasing (offline) | {bound['free_nodes']} |"
        f" {bound['placeable_8gpu_pods']} | {bound['pending_pods']} | 1.0 | |",
        "",
        "A claim that names a DeviceClass gets no utilization score from the upstream scheduler:"
        " the DynamicResources plugin scores only which prioritized-list alternative was chosen,"
        " and NodeResourcesFit does not see claims. Through a DeviceClass with"
        " extendedResourceName (the chart's `dra.extendedResource`), NodeResourcesFit counts the"
        " class's devices as the node's nvidia.com/gpu, and MostAllocated packs them as it packs"
        " a device plugin's GPUs. With 10m of CPU every node scores the same, and the scheduler"
        " breaks the tie the same way for each pod it does not batch (pods with claims, or with"
        " DRA-backed extended resources, are never batched): first fit in node order, which"
        " packs whatever the profile. With 10 cores a GPU the default profile spreads (0 free"
        " nodes on both routes). The chart's profile packs claims then only because its"
        " MostAllocated reads CPU, which here grows with the GPUs: for claims whose pods' CPU"
        " does not follow their GPUs, upstream has nothing to pack them by, and the"
        " extendedResourceName route is the one that packs GPUs as such. Goal: ≥ 0.95 of FFD"
        " for our profile.",
        "",
        f"![B4-DRA]({img})",
    ]


def ratio_over_time(name: str, run: dict[str, Any]) -> str:
    fig, axes = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for ax, size in zip(axes, ("8gpu", "4gpu"), strict=True):
        for short, lane in run["lanes"].items():
            points = lane["checkpoints"]
            ax.plot(
                [c["t"] for c in points],
                [
                    float("nan") if c[f"ratio_{size}"] is None else c[f"ratio_{size}"]
                    for c in points
                ],
                marker="o",
                linewidth=2.5 if short in ("ours", "default") else 1,
                label=short,
            )
        ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{size[0]}-GPU jobs still placeable, of an offline FFD repack")
        ax.set_ylabel("ratio")
        ax.set_ylim(-0.05, 1.3)
    axes[0].legend(fontsize=8, ncol=5, loc="upper center")
    axes[1].set_xlabel("seconds after warm-up")
    fig.suptitle(f"B4c: packing under churn (seed {run['seed']})")
    fig.tight_layout()
    return save(fig, name)


def _against_default(r: dict[str, Any], short: str) -> str:
    pairs = [
        (a["ratio_8gpu"], b["ratio_8gpu"])
        for run in r["runs"]
        for a, b in zip(
            run["lanes"][short]["checkpoints"], run["lanes"]["default"]["checkpoints"], strict=False
        )
        if a["ratio_8gpu"] is not None and b["ratio_8gpu"] is not None
    ]
    above = sum(1 for a, b in pairs if a > b)
    below = sum(1 for a, b in pairs if a < b)
    return f"{above} above, {below} below, {len(pairs) - above - below} equal"


def _b4c_limits(r: dict[str, Any]) -> list[str]:
    points = [c for run in r["runs"] for c in run["lanes"]["ours"]["checkpoints"]]
    zero = [c for c in points if c["ratio_8gpu"] == 0]
    capacity = r["runs"][0]["lanes"]["ours"]["capacity_gpus"]

    def mean(key: str) -> float:
        return round(float(sum(c[key] for c in points)) / len(points), 2)

    free = round(sum(capacity * (1 - c["load"]) for c in points) / len(points), 1)
    default = r["lanes"]["default"]
    return [
        f"What limits it: at an average checkpoint the schedpolicy lane has {free} of its"
        f" {capacity} GPUs free. Left where they are, its running jobs leave room for"
        f" {mean('placeable_8gpu')} 8-GPU jobs; repacked, for {mean('ffd_placeable_8gpu')}. Of"
        f" the {len(zero)} checkpoints (of {len(points)}) where no 8-GPU job fits but a repack"
        f" would make room, {sum(1 for c in zero if not c['pending_jobs'])} have no pod"
        " waiting at all: the free GPUs lie in pieces smaller than a node. A scheduler places"
        " each job once, when it arrives, and jobs end at random times, so holes open on many"
        " nodes at once; the repack moves every running job, which only a defragmenting"
        " descheduler (or placement that knows when jobs end) could match. The default"
        f" profile spreads: it places {default['mean_load']} of the GPUs against"
        f" {r['lanes']['ours']['mean_load']} for the same requests, and keeps up to"
        f" {default['max_pending_jobs']} jobs waiting that a repack would place.",
    ]


def section_b4c(r: dict[str, Any]) -> list[str]:
    img = ratio_over_time("b4c-churn", r["runs"][0])
    lanes, nodes = r["lanes"], r["nodes_per_lane"]
    default = lanes["default"]
    rows = [
        f"| {lane['description']} | {lane['turnover']} | {lane['requested_load']['mean']}"
        f" | {lane['mean_load']} | **{lane['min_ratio_8gpu']}** | {lane['mean_ratio_8gpu']}"
        f" | **{lane['pooled_ratio_8gpu']}** | {lane['min_ratio_4gpu']} | {lane['pooled_ratio_4gpu']}"
        f" | {lane['max_pending_jobs']} / {lane['max_ffd_pending_jobs']}"
        f" | {'-' if short == 'default' else _against_default(r, short)} |"
        for short, lane in lanes.items()
    ]
    seeds = [
        f"| {run['seed']} | {run['job_sizes']} | {run['tick_seconds']['mean']} /"
        f" {run['tick_seconds']['max']} | "
        + " | ".join(str(lane["pooled_ratio_8gpu"]) for lane in run["lanes"].values())
        + " |"
        for run in r["runs"]
    ]
    ours = lanes["ours"]
    return [
        "## B4c: GPU packing under churn",
        f"Each profile gets its own lane of {nodes['8gpu']} 8-GPU and {nodes['4gpu']} 4-GPU nodes"
        f" and the same seeded stream of jobs (seeds {r['seeds']}; 1/2/4/8 GPUs, 4-12 CPUs per"
        f" GPU, lifetimes uniform around {r['mean_lifetime_seconds']} s; KWOK completes each pod"
        " when its lifetime is up). A lane's next job is created whenever its unfinished jobs"
        f" ask for at most {r['target_load']} of its GPUs. All lanes run at once on the real"
        f" kube-scheduler. After a {r['warmup_seconds']} s warm-up, every"
        f" {r['checkpoint_every_seconds']} s for {r['window_seconds']} s, each lane's free GPUs"
        " are compared with a first-fit-decreasing repack (smallest nodes first) of the jobs"
        " running at that moment, and its unschedulable pods with a repack of the running and"
        " the pending jobs together.",
        "",
        "| profile | turnover | load requested | load placed | 8-GPU ratio, min | mean |"
        " pooled | 4-GPU ratio, min | pooled | max pending / FFD's | 8-GPU ratio vs default,"
        " per checkpoint |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Pooled 8-GPU ratio by seed, with the jobs each seed started, by size:",
        "",
        "| seed | jobs by GPUs | driver tick, mean / max s | " + " | ".join(lanes) + " |",
        "|---|---|---|" + "---|" * len(lanes),
        *seeds,
        "",
        f"**schedpolicy-scheduler: minimum {ours['min_ratio_8gpu']}, mean"
        f" {ours['mean_ratio_8gpu']}; default profile: minimum {default['min_ratio_8gpu']}, mean"
        f" {default['mean_ratio_8gpu']}** (goal: minimum ≥ 0.9 and above the default profile at"
        " every checkpoint). A checkpoint where the repack itself has no room for an 8-GPU job"
        " has no ratio and is left out of the minimum.",
        "",
        *_b4c_limits(r),
        "",
        f"![B4c]({img})",
    ]
