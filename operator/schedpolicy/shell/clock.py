"""The controller's one clock: wall time for what it writes, monotonic time for when."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Clock:
    wall: Callable[[], datetime] = _utc_now  # timestamps in statuses, ages of pods
    monotonic: Callable[[], float] = time.monotonic  # rate limits, retries, intervals
