"""Policies and workloads the in-cluster modules share: a GPU-labelling policy over the KWOK
pool, and a policy that places and costs the pods of two namespaces."""

from __future__ import annotations

from typing import Any

from tests.e2e.kubeobjects import PAUSE_IMAGE
from tests.incluster.conftest import POOL

APP_NS = "incluster-app"
LOAD_NS = "incluster-load"
SCHEDULER = "schedpolicy-scheduler"


def policies() -> list[dict[str, Any]]:
    labels = {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "incluster-gpu-labels"},
        "spec": {
            "priority": 600,
            "nodeLabels": {
                "gpu": {"sources": ["InstanceType"], "nodeSelector": {"matchLabels": POOL}}
            },
        },
    }
    apps = {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "incluster-apps"},
        "spec": {
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "In",
                        "values": [APP_NS, LOAD_NS],
                    }
                ]
            },
            "placement": {
                "schedulerName": SCHEDULER,
                "gpu": {"models": ["A100"], "minMemoryMiB": 40960},
            },
            "deletionCost": {"signals": [{"type": "CapacityType", "capacityType": {"spot": -100}}]},
        },
    }
    return [labels, apps]


def gpu_deployment(replicas: int) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "gpu"}},
        "spec": {
            "nodeSelector": POOL,
            "containers": [
                {
                    "name": "c",
                    "image": PAUSE_IMAGE,
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}},
                }
            ],
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gpu", "namespace": APP_NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "gpu"}},
            "template": template,
        },
    }
