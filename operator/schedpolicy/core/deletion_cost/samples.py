"""Per-pod metric samples for the Metric signal: parsing and the trust checks. Pure.

A sample may move a pod's cost only if it is finite, non-negative, recent,
not from the future, and about this very pod (its UID). Anything else is a
Rejection with a reason, and the caller leaves the pod's cost as it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families

from schedpolicy.core import timestamps

# Clocks of the pod and the operator disagree a little; beyond this a sample is "future".
FUTURE_TOLERANCE = timedelta(seconds=5)
POD_UID_LABEL = "pod_uid"

RejectReason = Literal[
    "no-sample",
    "malformed",
    "ambiguous",
    "not-finite",
    "negative",
    "future",
    "stale",
    "wrong-uid",
    "timeout",
    "unreachable",
]


@dataclass(frozen=True)
class Sample:
    value: float
    observed_at: datetime
    pod_uid: str | None  # None when the source does not say which pod it describes


@dataclass(frozen=True)
class Rejection:
    reason: RejectReason
    detail: str


def from_annotation(raw: str | None) -> Sample | Rejection:
    """`{"value": 12, "observedAt": "2026-01-01T00:00:00Z", "podUID": "..."}`."""
    if raw is None:
        return Rejection("no-sample", "the sample annotation is absent")
    try:
        doc = json.loads(raw)
        value = doc["value"]
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError("value is not a number")
        number = float(value)  # "NaN" and "Infinity" parse here and are judged below
        observed = timestamps.parse(str(doc["observedAt"]))
        uid = doc.get("podUID")
        return Sample(number, observed, str(uid) if uid is not None else None)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        return Rejection("malformed", f"unreadable sample annotation: {err}")


def from_exposition(text: str, metric: str, scraped_at: datetime) -> Sample | Rejection:
    """Read one gauge from Prometheus text exposition format."""
    try:
        series = [
            s
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == metric
        ]
    except (ValueError, TypeError, IndexError) as err:
        return Rejection("malformed", f"unparsable metrics endpoint: {err}")
    if not series:
        return Rejection("no-sample", f"the endpoint exports no {metric}")
    if len(series) > 1:
        return Rejection("ambiguous", f"{metric} has {len(series)} series; expected one")
    (s,) = series
    observed = scraped_at
    if s.timestamp is not None:
        observed = datetime.fromtimestamp(float(s.timestamp), UTC)
    return Sample(float(s.value), observed, s.labels.get(POD_UID_LABEL))


def check(sample: Sample, pod_uid: str, now: datetime, max_age: timedelta) -> Rejection | None:
    if not math.isfinite(sample.value):
        return Rejection("not-finite", f"sample value {sample.value} is not finite")
    if sample.value < 0:
        return Rejection("negative", f"sample value {sample.value} is negative")
    if sample.pod_uid is not None and sample.pod_uid != pod_uid:
        return Rejection("wrong-uid", f"sample is for pod UID {sample.pod_uid}, not {pod_uid}")
    if sample.observed_at > now + FUTURE_TOLERANCE:
        return Rejection(
            "future", f"sample is dated {sample.observed_at.isoformat()}, in the future"
        )
    if now - sample.observed_at > max_age:
        age = int((now - sample.observed_at).total_seconds())
        return Rejection(
            "stale", f"sample is {age}s old; maxAgeSeconds is {int(max_age.total_seconds())}"
        )
    return None
