"""B4c's lanes: one per scheduler profile, each with nodes of its own and its own progress
through the shared job stream. The chart's schedpolicy-scheduler profile, the cluster's
default profile, and alternatives NodeResourcesFit offers upstream, run as extra profiles
of one more kube-scheduler process built from the chart's own configuration.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import fleet
from bench.packing.churn_model import Job
from localcluster import LocalCluster, binaries, chart
from localcluster.topology import FakeNode

NAMESPACE = "bench-churn"
GPU = "nvidia.com/gpu"
LIFETIME = "pod-complete.stage.kwok.x-k8s.io/delay"
LANE_LABEL = "bench-churn"
ALTERNATIVES_PROCESS = "b4c-kube-scheduler"


@dataclass
class Profile:
    """One profile's nodes and its progress through the shared stream."""

    short: str
    scheduler: str
    description: str
    capacities: dict[str, int] = field(default_factory=dict)
    next_job: int = 0
    completed_gpus: int = 0
    alive: set[str] = field(default_factory=set)  # unfinished at the last list
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    demand: list[float] = field(default_factory=list)

    @property
    def capacity(self) -> int:
        return sum(self.capacities.values())

    def fresh(self) -> Profile:
        """The same profile and nodes, at the start of a stream."""
        return Profile(self.short, self.scheduler, self.description, dict(self.capacities))


def _fit_args(strategy: dict[str, Any]) -> dict[str, Any]:
    return {"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}


def alternative_profiles() -> list[tuple[str, str, dict[str, Any]]]:
    """(short name, what it is, NodeResourcesFit scoring strategy) for each alternative."""
    light = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    return [
        (
            "gpu10",
            "MostAllocated, cpu 1 / memory 1 / gpu 10 (the chart's default before B4c)",
            {"type": "MostAllocated", "resources": [*light, {"name": GPU, "weight": 10}]},
        ),
        (
            "gpu-only",
            "MostAllocated over nvidia.com/gpu alone",
            {"type": "MostAllocated", "resources": [{"name": GPU, "weight": 1}]},
        ),
        (
            "gpu3",
            "MostAllocated, cpu 1 / memory 1 / gpu 3",
            {"type": "MostAllocated", "resources": [*light, {"name": GPU, "weight": 3}]},
        ),
        (
            "rtcr-convex",
            "RequestedToCapacityRatio, cpu 1 / memory 1 / gpu 10, shape 0→0, 75→2, 100→10",
            {
                "type": "RequestedToCapacityRatio",
                "resources": [*light, {"name": GPU, "weight": 10}],
                "requestedToCapacityRatio": {
                    "shape": [
                        {"utilization": 0, "score": 0},
                        {"utilization": 75, "score": 2},
                        {"utilization": 100, "score": 10},
                    ]
                },
            },
        ),
    ]


def alternatives_config(workdir: Path, kubeconfig: Path) -> Path:
    """The chart's scheduler configuration, one profile per alternative, differing from the
    chart's profile only in NodeResourcesFit's scoring strategy."""
    config = chart.scheduler_config(chart.render("templates/scheduler/configmap.yaml"))
    (base,) = config["profiles"]
    profiles = []
    for short, _, strategy in alternative_profiles():
        profile = copy.deepcopy(base)
        profile["schedulerName"] = f"b4c-{short}"
        profile["pluginConfig"] = [
            _fit_args(strategy) if p["name"] == "NodeResourcesFit" else p
            for p in profile["pluginConfig"]
        ]
        profiles.append(profile)
    config["profiles"] = profiles
    config["leaderElection"] = {"leaderElect": False}
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    path = workdir / "b4c-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_alternatives(cluster: LocalCluster) -> None:
    kubeconfig = cluster.service_account_kubeconfig("schedpolicy-scheduler", "b4c-scheduler")
    config = alternatives_config(cluster.workdir, kubeconfig)
    cluster.supervisor.start(
        ALTERNATIVES_PROCESS,
        [
            str(binaries.path("kube-scheduler")),
            f"--config={config}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--secure-port=0",  # nothing to serve: the lanes' pods show whether it works
        ],
    )


def profiles() -> list[Profile]:
    return [
        Profile("ours", "schedpolicy-scheduler", "schedpolicy-scheduler (the chart's profile)"),
        Profile("default", "default-scheduler", "default profile"),
        *(Profile(short, f"b4c-{short}", what) for short, what, _ in alternative_profiles()),
    ]


def profile_nodes(lane: Profile, eights: int, fours: int) -> list[FakeNode]:
    nodes = []
    for gpus, count, cpu in ((8, eights, "96"), (4, fours, "48")):
        made = fleet.fake_nodes(
            f"churn-{lane.short}-{gpus}g",
            count,
            cpu=cpu,
            gpus=gpus,
            labels={LANE_LABEL: lane.short},
        )
        nodes += made
        lane.capacities.update({n.name: gpus for n in made})
    return nodes


def job_pod(lane: Profile, job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{lane.short}-{job.index:05d}",
            "namespace": NAMESPACE,
            "labels": {"app": "gpu-churn", LANE_LABEL: lane.short},
            "annotations": {LIFETIME: f"{job.lifetime}s"},
        },
        "spec": {
            "schedulerName": lane.scheduler,
            "nodeSelector": {LANE_LABEL: lane.short},
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "job",
                    "image": fleet.PAUSE,
                    "resources": {
                        "requests": {"cpu": str(job.cpu), "memory": "1Gi"},
                        "limits": {GPU: str(job.gpus)},
                    },
                }
            ],
        },
    }
