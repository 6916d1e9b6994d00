"""Policies and workloads for the in-cluster modules: a GPU-labelling policy over the KWOK
pool, a policy that places and costs the pods of two namespaces, a GPU Deployment, and a
steady stream of pod creates."""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.request
from typing import Any

from localcluster import LocalCluster
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


class PodStream:
    """Creates bare pods at a steady rate straight through the API, as a burst of users would."""

    def __init__(self, cluster: LocalCluster, namespace: str, per_second: float) -> None:
        self.url = f"{cluster.server}/api/v1/namespaces/{namespace}/pods"
        self.context: ssl.SSLContext = cluster.ssl_context()
        self.period = 1 / per_second
        self.created: list[str] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PodStream:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            name = f"load-{len(self.created) + len(self.failed):05d}"
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": "load"}},
                "spec": {
                    "nodeSelector": {"type": "kwok"},
                    "containers": [{"name": "c", "image": PAUSE_IMAGE}],
                },
            }
            request = urllib.request.Request(
                self.url,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=30):
                    self.created.append(name)
            except OSError as err:
                self.failed.append(f"{name}: {err}")
            due += self.period
            self._stop.wait(max(0.0, due - time.monotonic()))
