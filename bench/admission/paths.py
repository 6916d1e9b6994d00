"""B3's admission paths, a lane each (bench.lanes), each under the same load and the same
burst: no admission; the compiled MutatingAdmissionPolicy; our webhook; and webhooks that
decide nothing, in Python (null_webhook.py) and in Go (go_null_webhook/), for what this
machine allows any webhook.

Between lanes no webhook configuration is registered and no policy is compiled: each lane
registers (or compiles) its own path and takes it away again. Our webhook's process runs in
every lane but the one with no admission, as a deployed webhook would beside the others.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import fleet
from bench.admission.load import clear_load, create_load, hinted, loaded, run_burst
from bench.convergence import profiled
from bench.lanes import Figures, Lane
from bench.scale import Scale
from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess, controller
from localcluster.ports import free_port
from localcluster.webhook import LoopbackWebhook

# The chart's own name: the controller's RBAC lets it narrow only that configuration.
CONFIGURATION = "schedpolicy"
# A controller in webhook mode removes compiled objects, so the compiled lane's keeps them.
POLICY_MODE = ("--admission-mode=policy", f"--webhook-configuration={CONFIGURATION}")
MANAGED = "app.kubernetes.io/managed-by=schedpolicy"
POLICY_KINDS = "mutatingadmissionpolicybindings,mutatingadmissionpolicies"


def go_built(program: str, binary: Path) -> Path:
    """The Go program in this directory's `program`/ built with this machine's Go."""
    source = Path(__file__).with_name(program)
    subprocess.run(
        ["go", "build", "-o", str(binary), "."], cwd=source, check=True, capture_output=True
    )
    return binary


def go_null_webhook(workdir: Path) -> Path:
    """go_null_webhook/ built (standard library only)."""
    return go_built("go_null_webhook", workdir / "go-null-webhook")


def compile_policies(cluster: LocalCluster) -> None:
    """A policy-mode controller writes the bench policy's MutatingAdmissionPolicy and
    narrows the webhook, then stops: what it wrote stays, and serves without it."""
    proc = controller(cluster, *POLICY_MODE)
    try:
        fleet.wait_for(
            lambda: (
                cluster.kubectl(
                    "get", "spol", "bench-webhook", "-o", "jsonpath={.status.admission.path}"
                )
                == "MutatingAdmissionPolicy"
            ),
            "the bench policy compiled",
            within=120,
            every=1,
        )
        time.sleep(6)  # past the controller's settle time: the webhook is narrowed
    finally:
        proc.stop()


def compiled_objects(cluster: LocalCluster) -> list[dict[str, Any]]:
    """The compiled policy and binding as stored, ready to be applied again. Without their
    owner: it is the webhook configuration, which the lanes taken in turn unregister, and
    the garbage collector would delete the objects again as soon as they were applied."""
    items = json.loads(cluster.kubectl("get", POLICY_KINDS, "-l", MANAGED, "-o", "json"))["items"]
    keep = ("name", "labels", "annotations")
    for item in items:
        item["metadata"] = {k: v for k, v in item["metadata"].items() if k in keep}
        item.pop("status", None)
    return list(items)


def point_at(webhook: LoopbackWebhook, port: int | None = None) -> None:
    """(Re)register the webhook configuration with its URL on the webhook's loopback port
    (or on `port`)."""
    webhook.register(port=port)
    time.sleep(3)  # the apiserver picks up webhook configurations asynchronously


class Paths:
    """What the lanes share: the cluster, the chart's webhook configuration pointed at
    loopback, our webhook's process while lanes want it, and the compiled objects the
    compiled lane leaves for the lanes taken in turn."""

    def __init__(self, cluster: LocalCluster, scale: Scale, out: Path) -> None:
        self.cluster, self.scale, self.out = cluster, scale, out
        self.webhook = LoopbackWebhook(
            cluster, cluster.workdir / "bench-webhook-pki", CONFIGURATION
        )
        self.log = cluster.workdir / "logs" / "schedpolicy-webhook.log"
        self.process: OperatorProcess | None = None
        self.compiled: list[dict[str, Any]] = []

    def lanes(self) -> list[Lane]:
        return [
            Lane("none", self.none),
            Lane("compiled", self.compiled_policy),
            Lane("webhook", self.ours),
            Lane("python_null", self.python_null),
            Lane("go_null", self.go_null),
        ]

    def serving(self) -> OperatorProcess:
        """Our webhook's process, started if it is not running."""
        if self.process is None:
            self.process = self.webhook.start(self.log, timeout=300)
        return self.process

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def measure(self, name: str, repeat: int, **load: Any) -> Figures:
        """The lane's load (bench.admission.load.loaded), the hints its pods got, then the
        burst."""
        tag = name.replace("_", "-")  # pod and Deployment names
        prefix = tag if repeat == 0 else f"{tag}-{repeat}"
        figures = loaded(self.cluster, self.scale, prefix, **load)
        figures["hinted_under_load"] = hinted(self.cluster)
        clear_load(self.cluster)
        figures["burst"] = run_burst(self.cluster, self.scale, f"burst-{prefix}")
        return figures

    def none(self, cluster: LocalCluster, repeat: int) -> Figures:
        """No admission at all: no webhook registered, no policy compiled."""
        self.stop()
        return self.measure("none", repeat)

    def compiled_policy(self, cluster: LocalCluster, repeat: int) -> Figures:
        """The MutatingAdmissionPolicy serves, and the webhook is never called."""
        ours = self.compile()
        figures = self.measure(
            "compiled", repeat, own_port=ours.metrics_port, controller_args=POLICY_MODE
        )
        self.keep_compiled()
        return figures

    def compile(self) -> OperatorProcess:
        """The bench policy compiled by a policy-mode controller, our webhook serving."""
        ours = self.serving()
        point_at(self.webhook)
        compile_policies(self.cluster)
        return ours

    def keep_compiled(self) -> None:
        """The compiled objects kept for later lanes, then removed with the webhook's
        configuration: no admission is left in force."""
        self.compiled = compiled_objects(self.cluster)
        self.cluster.kubectl("delete", POLICY_KINDS, "-l", MANAGED)
        self.webhook.unregister()

    def ours(self, cluster: LocalCluster, repeat: int) -> Figures:
        """Our webhook, under a fresh configuration (without the narrowed match condition),
        with the apiserver's CPU profile taken meanwhile."""
        ours = self.serving()
        point_at(self.webhook)
        figures = self.measure(
            "webhook",
            repeat,
            own_port=ours.metrics_port,
            profile=self.out.parent / "profiles" / "b3-apiserver.txt",
            pid=ours.proc.pid,
        )
        self.webhook.unregister()
        return figures

    def null_argv(self, name: str) -> list[str]:
        if name == "python_null":
            return [sys.executable, "-m", "bench.admission.null_webhook"]
        return [str(go_null_webhook(self.cluster.workdir))]

    def start_null(self, name: str) -> subprocess.Popen[bytes]:
        """A webhook that decides nothing, on a port of its own with our certificate, with
        the chart's configuration pointed at it (our own process runs beside it)."""
        self.serving()
        port = free_port()
        null = subprocess.Popen(
            [*self.null_argv(name), str(port), str(self.webhook.cert), str(self.webhook.key)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        point_at(self.webhook, port)
        return null

    def null(self, name: str, repeat: int) -> Figures:
        null = self.start_null(name)
        try:
            return self.measure(name, repeat, pid=null.pid)
        finally:
            null.terminate()
            null.wait()
            self.webhook.unregister()

    def python_null(self, cluster: LocalCluster, repeat: int) -> Figures:
        return self.null("python_null", repeat)

    def go_null(self, cluster: LocalCluster, repeat: int) -> Figures:
        return self.null("go_null", repeat)

    def profiled(self) -> None:
        """The same load once more under pyinstrument, kept apart: profiling slows the
        webhook."""
        self.stop()
        point_at(self.webhook)
        profile = self.out.parent / "profiles" / "b3-webhook.txt"
        profile.parent.mkdir(exist_ok=True)
        ours = self.webhook.start(
            self.log, module=profiled.MODULE, env=profiled.env(profile), timeout=300
        )
        asyncio.run(create_load(self.cluster, self.scale.webhook_seconds, "profiled"))
        ours.stop()
        self.webhook.unregister()
