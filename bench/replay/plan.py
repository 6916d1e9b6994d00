"""What a replay asks of a cluster: Deployments, their replicas at the start, and every
change after, on the replay's clock. Pure; the same plan drives every lane and repeat.

Time is compressed by `Timers.compression` (at most 30): a trace's second lasts
1 / compression seconds of replay, and so do the timers that shape what a cluster does with
the load (HPA's sync and windows, Karpenter's consolidateAfter, a node's boot, a replica's
start-up, and Karpenter's own fixed timers through tools/karpenter/replay-timers.patch), once
divided by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bench.replay.hpa import Behavior

MAX_COMPRESSION = 30.0
BUCKET_SECONDS = 600  # the traces' 10-minute grid, for the replay's summary


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Timers:
    """Real-world seconds; `replay` divides each by the compression."""

    compression: float = MAX_COMPRESSION
    consolidate_after: float = 300.0  # Karpenter's NodePool disruption.consolidateAfter
    startup: float = 180.0  # a replica's model load: bound to Ready
    # A launched node's boot, launch to Node registered (a cloud's 1 to 2 minutes);
    # Karpenter's KWOK provider would otherwise register it at once. Replayed in whole
    # seconds, as the KWOK node class takes it.
    node_boot: float = 100.0
    hpa: Behavior = field(default_factory=Behavior)

    def replay(self, seconds: float) -> float:
        return seconds / self.compression

    def boot(self) -> int:
        """A node's boot in replay seconds, whole, as the KWOK node class takes it."""
        return round(self.replay(self.node_boot))

    def check(self) -> None:
        if not 1 <= self.compression <= MAX_COMPRESSION:
            raise PlanError(f"compression {self.compression} is outside 1..{MAX_COMPRESSION}")


@dataclass(frozen=True)
class Shape:
    """One Deployment: what each of its replicas asks for."""

    name: str
    gpus: int
    cpu: str
    memory: str


@dataclass(frozen=True)
class Step:
    at: float  # replay seconds from the start of the measured window
    service: str
    replicas: int


@dataclass(frozen=True)
class Plan:
    services: tuple[Shape, ...]
    start: float  # trace seconds at the window's start (for the clock shown)
    length: float  # trace seconds measured
    timers: Timers
    initial: Mapping[str, int]
    steps: tuple[Step, ...]

    @property
    def duration(self) -> float:
        return self.timers.replay(self.length)

    def trace_seconds(self, replay: float) -> float:
        return self.start + replay * self.timers.compression

    def replicas(self, service: str) -> list[tuple[float, int]]:
        """(replay time, replicas) from 0, one point a change."""
        points = [(0.0, self.initial[service])]
        points += [(s.at, s.replicas) for s in self.steps if s.service == service]
        return points

    def gpus_over_time(self) -> list[tuple[float, dict[int, int]]]:
        """(replay time, replicas asked for by GPU size) at each change."""
        current = dict(self.initial)
        by_size = {s.name: s.gpus for s in self.services}
        times = [0.0, *sorted({s.at for s in self.steps})]
        out = []
        steps = iter(sorted(self.steps, key=lambda s: s.at))
        pending = next(steps, None)
        for t in times:
            while pending is not None and pending.at <= t:
                current[pending.service] = pending.replicas
                pending = next(steps, None)
            demand: dict[int, int] = {}
            for name, replicas in current.items():
                if by_size[name] and replicas:
                    demand[by_size[name]] = demand.get(by_size[name], 0) + replicas
            out.append((t, demand))
        return out

    def summary(self) -> dict[str, object]:
        return {
            "trace_hours": round(self.length / 3600, 2),
            "first_bucket_clock": f"{int(self.start) % 86_400 // 3600:02d}:00",
            "compression": self.timers.compression,
            "replay_seconds": round(self.duration),
            "hpa_sync_s": round(self.timers.replay(self.timers.hpa.sync_period), 3),
            "hpa_scale_down_window_s": round(self.timers.replay(self.timers.hpa.down_window), 3),
            "consolidate_after_s": round(self.timers.replay(self.timers.consolidate_after), 3),
            "startup_s": round(self.timers.replay(self.timers.startup), 3),
            "node_boot_s": self.timers.boot(),
            # Karpenter's own fixed timers run this many times faster (replay-timers.patch).
            "karpenter_time_scale": self.timers.compression,
            "scale_steps": len(self.steps),
        }
