"""One lane run: a fresh cluster with Karpenter and no nodes, the plan's Deployments at
their first replicas, then the plan, step by step, and what it cost.

What a lane changes is data (bench/replay/lanes.yaml, `LaneSpec`): the scheduler the pods name,
whether the operator runs and under which policy, Karpenter's feature gates, the GPU pool's
consolidation policy and the GPU replicas' annotations. Karpenter runs on the replay's clock:
its fixed timers divided by the compression (tools/karpenter/replay-timers.patch), its
consolidateAfter and a node's boot scaled the same way.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.replay.lane_spec import LaneSpec
from bench.replay.measure import Eviction, write_audit
from bench.replay.observe import SERVICE_LABEL, Seen, Watcher
from bench.replay.plan import Plan, Shape, Timers
from localcluster import LocalCluster, audit, chart
from localcluster.binaries import REPO
from localcluster.karpenter import GPU, GPU_TOLERATION, KarpenterOptions

SCHEDULER = "schedpolicy-scheduler"
PAUSE = "registry.k8s.io/pause:3.10"
KARPENTER_USER = "karpenter"
HEADROOM = "templates/headroom/headroom.yaml"
# KWOK's pod-ready stage waits this long (a Go duration) before a bound pod runs and is
# Ready: the replica's model load.
STARTUP_ANNOTATION = "pod-ready.stage.kwok.x-k8s.io/delay"


@dataclass(frozen=True)
class Workload:
    """What a benchmark replays: its namespace, its plan, and the policy of its product lane
    (which must select the namespace)."""

    namespace: str
    plan: Plan
    policy: Mapping[str, Any]


def namespace_selector(namespace: str) -> dict[str, Any]:
    return {"matchLabels": {"kubernetes.io/metadata.name": namespace}}


def karpenter_options(lane: LaneSpec, timers: Timers) -> KarpenterOptions:
    """How the lane's Karpenter runs: on the replay's clock, with the lane's gates and GPU
    pool. consolidateAfter is whole seconds, as Karpenter's CRD asks."""
    return KarpenterOptions(
        feature_gates=dict(lane.karpenter_gates),
        consolidate_after=f"{max(1, round(timers.replay(timers.consolidate_after)))}s",
        gpu_taint=True,
        gpu_consolidation=lane.gpu_consolidation,
        time_scale=timers.compression,
        registration_delay=timers.boot(),
    )


def deployment(
    service: Shape,
    namespace: str,
    replicas: int,
    startup: float,
    scheduler: str | None,
    gpu_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": service.cpu, "memory": service.memory}}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "serve", "image": PAUSE, "resources": resources}],
    }
    if service.gpus:
        resources["limits"] = {GPU: str(service.gpus)}
        # As the ExtendedResourceToleration admission plugin would add it.
        spec["tolerations"] = [GPU_TOLERATION]
    if scheduler:
        spec["schedulerName"] = scheduler
    labels = {SERVICE_LABEL: service.name}
    annotations = {STARTUP_ANNOTATION: f"{int(startup * 1000)}ms"}
    if service.gpus and gpu_annotations:
        annotations.update(gpu_annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": service.name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": spec,
            },
        },
    }


@dataclass
class Run:
    """One lane run's raw evidence, its times shifted to the day's start."""

    lane: str
    repeat: int
    wave: int  # which wave of side-by-side runs it ran in
    seen: Seen
    evictions: list[Eviction]
    warmup_seconds: float
    late_steps: int  # scale steps sent more than a sync period after they were due
    writes: dict[str, object] | None = None  # the product lane's audit of the operator's writes


class LaneRun:
    """A lane on its own cluster: `prepare()` (cluster, Deployments, warm-up), then `day()`."""

    def __init__(
        self, lane: LaneSpec, repeat: int, wave: int, workload: Workload, workdir: Path
    ) -> None:
        self.spec, self.lane, self.repeat, self.wave = lane, lane.name, repeat, wave
        self.workload = workload
        self.plan, self.namespace = workload.plan, workload.namespace
        self.cluster = LocalCluster(workdir)
        self.watcher: Watcher | None = None
        self.warmup = 0.0

    def prepare(self, timeout: float = 600) -> None:
        plan, cluster, spec = self.plan, self.cluster, self.spec
        cluster.up(nodes=[], karpenter_options=karpenter_options(spec, plan.timers))
        cluster.kubectl("create", "namespace", self.namespace)
        if spec.product:
            cluster.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
            cluster.kubectl(
                "wait", "--for=condition=Established", "crd/schedulingpolicies.schedpolicy.io"
            )
            cluster.start_operator()
            policy = spec.policy_for(self.workload.policy)
            cluster.kubectl("apply", "-f", "-", objects=[policy])
            self._wait_for_hints()
        if spec.headroom:
            # The chart's own template, so that the lane measures what an install deploys.
            gpus = {"nvidia.com/gpu": spec.headroom_gpus}
            values = {
                "replicas": spec.headroom,
                "resources": {"requests": {**gpus, "cpu": "10m"}, "limits": gpus},
            }
            held = chart.render(HEADROOM, values={"headroom": values})
            cluster.kubectl("apply", "-f", "-", objects=held)
        self.watcher = Watcher(cluster.server, cluster.ssl_context(), self.namespace)
        self.watcher.start()
        started = time.monotonic()
        startup = plan.timers.replay(plan.timers.startup)
        docs = [
            deployment(
                s,
                self.namespace,
                plan.initial[s.name],
                startup,
                spec.scheduler,
                spec.gpu_pod_annotations,
            )
            for s in plan.services
        ]
        cluster.kubectl("create", "-f", "-", objects=docs)
        want = sum(plan.initial.values())
        deadline = started + timeout
        while self._ready_pods() < want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.lane}: {want} replicas not Ready in {timeout}s")
            time.sleep(1)
        self.warmup = time.monotonic() - started

    def _wait_for_hints(self, timeout: float = 90) -> None:
        """The webhook answers only once its view has synced; until then the apiserver fails
        open, and a pod would go unhinted."""
        gpu = next((s for s in self.plan.services if s.gpus), self.plan.services[0])
        probe = deployment(gpu, self.namespace, 1, 0, None)["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": self.namespace, **probe["metadata"]},
            "spec": probe["spec"],
        }
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.cluster.kubectl(
                "create", "--dry-run=server", "-o", "json", "-f", "-", objects=[pod]
            )
            if json.loads(out)["spec"].get("schedulerName") == SCHEDULER:
                return
            time.sleep(1)
        raise TimeoutError(f"product lane: the webhook did not hint a pod within {timeout}s")

    def _ready_pods(self) -> int:
        assert self.watcher is not None
        with self.watcher.lock:
            return sum(
                1
                for p in self.watcher.seen.pods.values()
                if p.ready is not None and p.gone is None and p.deleting is None
            )

    def day(self, go: threading.Event | None = None) -> Run:
        """The plan's steps at their times; returns once the day is over."""
        assert self.watcher is not None
        if go is not None:
            go.wait()
        day0 = self.watcher.now()
        wall0 = audit.now()
        begun = time.monotonic()
        late = 0
        sync = self.plan.timers.replay(self.plan.timers.hpa.sync_period)
        for step in self.plan.steps:
            wait = step.at - (time.monotonic() - begun)
            if wait > 0:
                time.sleep(wait)
            elif -wait > sync:
                late += 1
            self._scale(step.service, step.replicas)
        rest = self.plan.duration - (time.monotonic() - begun)
        if rest > 0:
            time.sleep(rest)
        self.watcher.stop()
        seen = self.watcher.seen.shifted(day0)
        logged = list(audit.events(self.cluster.audit_log))
        product = self.spec.product
        writes = write_audit(logged, seen, self.namespace) if product else None
        evictions = [
            Eviction(e.name, (e.at - wall0).total_seconds())
            for e in logged
            if e.user == KARPENTER_USER
            and e.resource == "pods"
            and e.subresource == "eviction"
            and e.verb == "create"
            and e.namespace == self.namespace
            and 200 <= e.code < 300
        ]
        return Run(self.lane, self.repeat, self.wave, seen, evictions, self.warmup, late, writes)

    def _scale(self, name: str, replicas: int) -> None:
        url = (
            f"{self.cluster.server}/apis/apps/v1/namespaces/{self.namespace}"
            f"/deployments/{name}/scale"
        )
        body = json.dumps({"spec": {"replicas": replicas}}).encode()
        request = urllib.request.Request(
            url, body, method="PATCH", headers={"Content-Type": "application/merge-patch+json"}
        )
        with urllib.request.urlopen(request, context=self.cluster.ssl_context(), timeout=30):
            pass

    def down(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        self.cluster.down()
