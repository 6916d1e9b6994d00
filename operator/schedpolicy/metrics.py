"""Prometheus metrics the operator exports on /metrics."""

from __future__ import annotations

from prometheus_client import Counter

STATUS_WRITES = Counter(
    "schedpolicy_status_writes_total",
    "SchedulingPolicy status writes, by result.",
    ["result"],
)
