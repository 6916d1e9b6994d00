"""Fake nodes made for one test, and the workloads and policies placed on them."""

from __future__ import annotations

import json
import uuid
from typing import Any

from localcluster import LocalCluster
from localcluster.topology import FakeNode

POOL_LABEL = "schedpolicy.io/e2e-pool"


class Pool:
    """Nodes only this test's pods can land on (they select the pool label)."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.tag = uuid.uuid4().hex[:6]
        self.selector = {POOL_LABEL: self.tag}
        self.nodes: list[FakeNode] = []

    def node(
        self,
        name: str,
        *,
        zone: str = "us-east-1a",
        cpu: str = "4",
        pods: str = "20",
        labels: dict[str, str] | None = None,
        gpus: str | None = None,
        instance_type: str = "m5.xlarge",
    ) -> FakeNode:
        resources = {"cpu": cpu, "memory": "16Gi", "pods": pods}
        if gpus is not None:
            resources["nvidia.com/gpu"] = gpus
        return FakeNode(
            name=f"{name}-{self.tag}",
            zone=zone,
            region="us-east-1",
            instance_type=instance_type,
            capacity=resources,
            allocatable=resources,
            labels={**self.selector, **(labels or {})},
        )

    def create(self, *nodes: FakeNode) -> list[FakeNode]:
        self.cluster.create_nodes(nodes)
        self.nodes.extend(nodes)
        return list(nodes)

    def cleanup(self) -> None:
        # Empty the nodes first: KWOK only finalizes pods on nodes it manages.
        self.cluster.kubectl(
            "delete",
            "deployment,replicaset,pod",
            "--all",
            "-n",
            self.namespace,
            "--wait=true",
            "--timeout=90s",
            "--grace-period=0",
            check=False,
        )
        for node in self.nodes:
            self.cluster.kubectl("delete", "node", node.name, "--ignore-not-found", "--wait=false")


def namespace_policy(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A SchedulingPolicy that governs pods of one namespace only."""
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            **spec,
        },
    }


def gpu_label_policy(
    name: str, prefix: str, selector: dict[str, str], sources: tuple[str, ...] = ("InstanceType",)
) -> dict[str, Any]:
    """A SchedulingPolicy that only labels the GPU nodes `selector` picks."""
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "nodeLabels": {
                "gpu": {
                    "labelPrefix": prefix,
                    "sources": list(sources),
                    "nodeSelector": {"matchLabels": selector},
                }
            }
        },
    }


def apply(cluster: LocalCluster, doc: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", objects=[doc])


def apply_namespace_policy(
    cluster: LocalCluster, policies: list[str], name: str, namespace: str, **spec: Any
) -> None:
    """Apply a policy over one namespace, named in `policies` so the fixture deletes it."""
    policies.append(name)
    apply(cluster, namespace_policy(name, namespace, **spec))


def get_json(cluster: LocalCluster, *args: str) -> Any:
    # kubectl hides managedFields unless asked; tests read them to tell who wrote what.
    return json.loads(cluster.kubectl("get", *args, "-o", "json", "--show-managed-fields"))
