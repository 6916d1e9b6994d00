"""Run-time settings of one operator process, shared with handlers through kopf's memo.

Deliberately not a `kopf.Memo`: that is a dict whose attribute reads fall back to
class attributes, so dataclass defaults would shadow the values actually set."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedpolicy.kube import Credentials


@dataclass
class RunConfig:
    credentials: Credentials = field(default_factory=Credentials)
    heartbeat_seconds: float = 60.0
    watch_timeout_seconds: int = 300
