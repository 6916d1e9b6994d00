"""A Deployment's scale-down, once per lane (bench.lanes): with no policy, or with a
SchedulingPolicy whose costs the running controller writes first.

A lane starts from the Deployment at full size and leaves neither its policy nor any cost
behind (the controller removes its costs once the policy is gone), so that lanes can take
turns in any order.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import fleet
from bench.lanes import Figures, Lane
from localcluster import LocalCluster
from schedpolicy.core.wellknown import COST_ANNOTATION

NAMESPACE = "bench-scaledown"
Pods = list[dict[str, Any]]


def greedy_ideal(per_node: Counter[str], remove: int) -> int:
    """Most nodes that removing `remove` replicas can empty: take the smallest nodes first."""
    emptied = 0
    for count in sorted(per_node.values()):
        if count > remove:
            break
        remove -= count
        emptied += 1
    return emptied


def policy(name: str, deletion_cost: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
            "deletionCost": deletion_cost,
        },
    }


def other_work(
    node: str, labels: dict[str, str], resources: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """Other work on a node: a bare pod bound to it directly, owned by no ReplicaSet."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"other-{node}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": fleet.PAUSE, "resources": resources}],
        },
    }


def scale_to(cluster: LocalCluster, name: str, replicas: int) -> Pods:
    cluster.kubectl("scale", "deployment", name, "-n", NAMESPACE, f"--replicas={replicas}")

    def done() -> Pods | None:
        pods = [
            p
            for p in fleet.pods(cluster, NAMESPACE, f"app={name}")
            if not p["metadata"].get("deletionTimestamp")
        ]
        return pods if len(pods) == replicas and all(fleet.running(p) for p in pods) else None

    return list(fleet.wait_for(done, f"{name} at {replicas} replicas", 300, 1))


def _costed(pod: dict[str, Any]) -> bool:
    return COST_ANNOTATION in (pod["metadata"].get("annotations") or {})


def costs_written(cluster: LocalCluster, name: str) -> bool:
    pods = fleet.pods(cluster, NAMESPACE, f"app={name}")
    return bool(pods) and all(_costed(p) for p in pods)


def costs_removed(cluster: LocalCluster, name: str) -> bool:
    """No replica still running carries a cost (the controller leaves a terminating pod's)."""
    pods = fleet.pods(cluster, NAMESPACE, f"app={name}")
    return not any(_costed(p) for p in pods if not p["metadata"].get("deletionTimestamp"))


@dataclass(frozen=True)
class ScaleDown:
    """Deployment `app` scaled from `full` to `to` replicas, once per lane. `policies`: each
    lane's policy (None: no policy). `check` asserts the layout at full size; `measure`
    gives the figures from the replicas before and after; `costed` says when a policy's
    costs are in (by default: on every replica)."""

    app: str
    full: int
    to: int
    policies: dict[str, dict[str, Any] | None]
    check: Callable[[Pods], None]
    measure: Callable[[LocalCluster, Pods, Pods], Figures]
    costed: Callable[[LocalCluster], bool] | None = None

    def lanes(self) -> list[Lane]:
        return [self.lane(name) for name in self.policies]

    def lane(self, name: str) -> Lane:
        return Lane(name, lambda cluster, repeat: self.run(cluster, self.policies[name]))

    def run(self, cluster: LocalCluster, policy: dict[str, Any] | None) -> Figures:
        before = scale_to(cluster, self.app, self.full)
        self.check(before)
        if policy is not None:
            self.apply(cluster, policy)
        after = scale_to(cluster, self.app, self.to)
        figures = self.measure(cluster, before, after)
        if policy is not None:
            self.drop(cluster, policy)
        return figures

    def apply(self, cluster: LocalCluster, policy: dict[str, Any]) -> None:
        """The policy applied, and its costs on the replicas."""
        costed = self.costed or (lambda c: costs_written(c, self.app))
        cluster.kubectl("apply", "-f", "-", objects=[policy])
        fleet.wait_for(lambda: costed(cluster), f"{policy['metadata']['name']}'s costs", 300, 1)
        time.sleep(3)

    def drop(self, cluster: LocalCluster, policy: dict[str, Any]) -> None:
        """The policy deleted, and the costs it wrote removed by the controller."""
        name = policy["metadata"]["name"]
        cluster.kubectl("delete", "spol", name)
        fleet.wait_for(lambda: costs_removed(cluster, self.app), f"{name}'s costs removed", 300, 1)
