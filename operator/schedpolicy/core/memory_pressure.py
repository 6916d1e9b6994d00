"""Is the process near its memory limit? Pure.

The limit is the cgroup's, as the kernel enforces it (the container's `resources.limits`),
read rather than configured a second time. cgroup v2 says `max` for no limit; cgroup v1
says a number near 2^63, rounded down to a page. Near means at or above NEAR of it: at that
point the admin still has time to raise the limit before the kernel kills the process.
"""

from __future__ import annotations

from dataclasses import dataclass

NEAR = 0.85
# cgroup v1's "no limit" is PAGE_COUNTER_MAX pages: 2^63 - 4096 with 4 KiB pages, and less
# with larger pages; nothing real comes near 2^60 bytes.
UNLIMITED_FROM = 1 << 60


def parse_limit(raw: str) -> int | None:
    """A cgroup memory limit file's content: bytes, or None for no limit."""
    text = raw.strip()
    if text == "max":
        return None
    value = int(text)
    return None if value >= UNLIMITED_FROM or value <= 0 else value


@dataclass(frozen=True)
class MemoryReading:
    rss: int  # bytes resident
    limit: int | None  # the cgroup's limit in bytes; None when there is none

    @property
    def share(self) -> float | None:
        return None if self.limit is None else self.rss / self.limit

    def near(self, threshold: float = NEAR) -> bool:
        share = self.share
        return share is not None and share >= threshold

    def describe(self) -> str:
        mib = 1 << 20
        if self.limit is None:
            return f"resident memory {self.rss / mib:.0f} MiB, no cgroup limit"
        return (
            f"resident memory {self.rss / mib:.0f} MiB is {self.share:.0%} of the cgroup limit"
            f" of {self.limit / mib:.0f} MiB; raise the limit (the chart's"
            " operator.resources.limits.memory) before the kernel kills the process"
        )


def crossed_into(before: bool, now: bool) -> bool:
    """Say it once per crossing, not on every reading while it lasts."""
    return now and not before
