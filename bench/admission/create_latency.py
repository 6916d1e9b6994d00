"""Each pod create's latency as the apiserver itself timed it, read from its audit log.

`apiserver_request_duration_seconds` has buckets at 5, 25 and 50 ms, so a p99 near 25 ms
moves by a whole bucket on a few slow creates, and a 5% difference cannot be seen in it.
The audit log's ResponseComplete event of every create carries the time the request was
received and the time its response was complete, to the microsecond: their difference is
the same span the histogram observes, one request at a time. The local cluster logs every
write at Metadata level or above (localcluster.controlplane.AUDIT_POLICY), so no create
is missed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@dataclass
class AuditCursor:
    """A place in the audit log; `creates` reads the pod creates logged since then. The
    apiserver rotates the log by renaming it: the renamed file, found by its inode, is read
    to its end before the new one."""

    log: Path
    inode: int = 0
    offset: int = 0

    @classmethod
    def now(cls, log: Path) -> AuditCursor:
        st = log.stat()
        return cls(log, st.st_ino, st.st_size)

    def _lines(self) -> Iterator[str]:
        if self.log.stat().st_ino != self.inode:
            rotated = [p for p in self.log.parent.iterdir() if p.stat().st_ino == self.inode]
            for path in rotated:
                with path.open() as f:
                    f.seek(self.offset)
                    yield from f
            start = 0
        else:
            start = self.offset
        with self.log.open() as f:
            f.seek(start)
            yield from f

    def creates(self, namespace: str) -> list[float]:
        """Milliseconds from receipt to response of each successful pod create in
        `namespace` since the cursor was made."""
        out: list[float] = []
        for line in self._lines():
            if '"create"' not in line or '"pods"' not in line:
                continue  # most lines; skip the JSON decoding
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line the apiserver is still writing
            ref = event.get("objectRef") or {}
            if (
                event.get("stage") != "ResponseComplete"
                or event.get("verb") != "create"
                or ref.get("resource") != "pods"
                or ref.get("subresource")
                or ref.get("namespace") != namespace
                or (event.get("responseStatus") or {}).get("code") != 201
            ):
                continue
            taken = _at(event["stageTimestamp"]) - _at(event["requestReceivedTimestamp"])
            out.append(taken / timedelta(milliseconds=1))
        return out


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile, linearly interpolated between order statistics (NaN when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
