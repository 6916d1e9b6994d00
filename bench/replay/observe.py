"""What the apiserver stored during a replay lane, as it happened: two watches (nodes, and the
lane's pods) that keep each object's first sight, binding, readiness and end, on the lane's
clock. Watches rather than polling: nine lanes side by side on two cores cannot afford a
kubectl a second each.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field, replace
from typing import Any

from localcluster.karpenter import CAPACITY_TYPE, GPU, INSTANCE_TYPE, NODEPOOL_LABEL
from schedpolicy.core.wellknown import COST_ANNOTATION

SERVICE_LABEL = "replay-service"


@dataclass
class NodeSeen:
    name: str
    instance_type: str
    capacity: str
    gpus: int
    pool: str
    added: float
    deleting: float | None = None
    gone: float | None = None


@dataclass
class PodSeen:
    name: str
    service: str
    added: float
    node: str = ""
    bound: float | None = None
    ready: float | None = None
    deleting: float | None = None
    gone: float | None = None
    scheduler: str = ""
    costed: bool = False  # carried a pod-deletion-cost at some point


@dataclass
class Seen:
    nodes: dict[str, NodeSeen] = field(default_factory=dict)  # by uid
    pods: dict[str, PodSeen] = field(default_factory=dict)  # by uid
    errors: list[str] = field(default_factory=list)

    def shifted(self, origin: float) -> Seen:
        """A copy whose times count from `origin` (the day's start)."""

        def move(value: float | None) -> float | None:
            return None if value is None else value - origin

        nodes = {
            uid: replace(n, added=n.added - origin, deleting=move(n.deleting), gone=move(n.gone))
            for uid, n in self.nodes.items()
        }
        pods = {
            uid: replace(
                p,
                added=p.added - origin,
                bound=move(p.bound),
                ready=move(p.ready),
                deleting=move(p.deleting),
                gone=move(p.gone),
            )
            for uid, p in self.pods.items()
        }
        return Seen(nodes, pods, list(self.errors))


def node_gpus(node: dict[str, Any]) -> int:
    """The GPUs a node holds. Karpenter's KWOK provider sets a node's capacity to the
    requests of the pods it was launched for (1 GPU of a 4-GPU type, say) and only its
    allocatable to the instance type's, so the larger of the two is what the node has."""
    status = node.get("status") or {}
    return max(
        int((status.get("capacity") or {}).get(GPU, "0")),
        int((status.get("allocatable") or {}).get(GPU, "0")),
    )


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or []
    )


class Watcher:
    """Watches nodes and `namespace`'s pods from `start()` until `stop()`."""

    def __init__(self, server: str, context: ssl.SSLContext, namespace: str) -> None:
        self.server = server
        self.context = context
        self.namespace = namespace
        self.seen = Seen()
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        for path, apply in (
            ("/api/v1/nodes", self._node),
            (f"/api/v1/namespaces/{self.namespace}/pods", self._pod),
        ):
            thread = threading.Thread(target=self._run, args=(path, apply), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)

    def _get(self, path: str, query: dict[str, str], timeout: float) -> Any:
        url = f"{self.server}{path}?{urllib.parse.urlencode(query)}"
        return urllib.request.urlopen(url, context=self.context, timeout=timeout)

    def _run(self, path: str, apply: Any) -> None:
        while not self._stop.is_set():
            try:
                with self._get(path, {}, 60) as listed:
                    doc = json.load(listed)
                at = self.now()
                with self.lock:
                    live = {item["metadata"]["uid"] for item in doc["items"]}
                    for item in doc["items"]:
                        apply("ADDED", item, at)
                    self._forget(path, live, at)
                version = doc["metadata"]["resourceVersion"]
                query = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "30"}
                with self._get(path, query, 45) as stream:
                    for line in stream:
                        if self._stop.is_set():
                            return
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            break
                        with self.lock:
                            apply(event["type"], event["object"], self.now())
            except Exception as err:  # the lane goes on; a gap is relisted
                with self.lock:
                    self.seen.errors.append(f"{path}: {err!r}")
                self._stop.wait(0.5)

    def _forget(self, path: str, live: set[str], at: float) -> None:
        """Objects that went while no watch was open end at the relist."""
        kept = self.seen.nodes if path.endswith("/nodes") else self.seen.pods
        for uid, obj in kept.items():
            if uid not in live and obj.gone is None:
                obj.gone = at

    def _node(self, kind: str, node: dict[str, Any], at: float) -> None:
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        seen = self.seen.nodes.get(meta["uid"])
        if seen is None:
            seen = self.seen.nodes[meta["uid"]] = NodeSeen(
                meta["name"],
                labels.get(INSTANCE_TYPE, ""),
                labels.get(CAPACITY_TYPE, ""),
                node_gpus(node),
                labels.get(NODEPOOL_LABEL, ""),
                at,
            )
        # Karpenter may fill in the status after it creates the node.
        seen.gpus = max(seen.gpus, node_gpus(node))
        if meta.get("deletionTimestamp") and seen.deleting is None:
            seen.deleting = at
        if kind == "DELETED" and seen.gone is None:
            seen.gone = at

    def _pod(self, kind: str, pod: dict[str, Any], at: float) -> None:
        meta = pod["metadata"]
        seen = self.seen.pods.get(meta["uid"])
        if seen is None:
            service = (meta.get("labels") or {}).get(SERVICE_LABEL, "")
            seen = self.seen.pods[meta["uid"]] = PodSeen(meta["name"], service, at)
            seen.scheduler = pod.get("spec", {}).get("schedulerName", "")
        if COST_ANNOTATION in (meta.get("annotations") or {}):
            seen.costed = True
        node = pod.get("spec", {}).get("nodeName") or ""
        if node and seen.bound is None:
            seen.node, seen.bound = node, at
        if _ready(pod) and seen.ready is None:
            seen.ready = at
        if meta.get("deletionTimestamp") and seen.deleting is None:
            seen.deleting = at
        if kind == "DELETED" and seen.gone is None:
            seen.gone = at
