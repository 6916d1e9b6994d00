"""Run-time settings and state of one operator process, shared with handlers as kopf's memo.

Deliberately not a `kopf.Memo`: that is a dict whose attribute reads fall back to
class attributes, so dataclass defaults would shadow the values actually set.
Kopf shallow-copies the memo per object after start-up, so everything handlers
share is an object created once in the start-up handler.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

from schedpolicy.core.memory_pressure import NEAR
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.leadership import Leadership, LeaseSettings
from schedpolicy.shell.placement.admission_sync import AdmissionSettings, AdmissionSync
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.shell.secure_metrics import MetricsServing
from schedpolicy.shell.sync_barrier import Seen
from schedpolicy.view.cluster import ClusterView


@dataclass
class RunConfig:
    credentials: Credentials = field(default_factory=Credentials)
    heartbeat_seconds: float = 60.0
    watch_timeout_seconds: int = 300
    write_concurrency: int = 16
    metrics: MetricsServing = field(default_factory=MetricsServing)
    pending_threshold_seconds: float = 60.0
    memory_near_ratio: float = NEAR
    lease: LeaseSettings | None = None  # None: no leader election, this process always writes
    liveness_port: int = 0
    identity: str = field(default_factory=socket.gethostname)
    # The admission guard's node label prefixes (None: not told; the apiserver judges).
    admitted_label_prefixes: frozenset[str] | None = None
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)


@dataclass
class OperatorState:
    config: RunConfig = field(default_factory=RunConfig)
    view: ClusterView = field(default_factory=ClusterView)
    seen: Seen = field(default_factory=Seen)  # what the sync barrier waits for
    kube: Kube | None = None
    reconciler: Reconciler | None = None
    leadership: Leadership | None = None
    admission: AdmissionSync | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def running_reconciler(self) -> Reconciler:
        if self.reconciler is None:
            raise RuntimeError("the reconciler starts in the start-up handler")
        return self.reconciler
