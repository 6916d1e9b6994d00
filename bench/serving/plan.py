"""What B7 asks of the cluster over its day: every service's replicas, step by step, as an HPA
would set them from the trace. Pure; the same plan drives every lane and repeat.

Time is compressed by `compression` (at most 30): a 10-minute bucket lasts 600 / compression
seconds of replay, and so do HPA's sync period and windows, Karpenter's consolidateAfter and
a replica's start-up (model load) once divided by it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bench.serving.load import BUCKET_SECONDS, Rates, Service, rate_of
from bench.serving.scaler import Behavior, Scaler

MAX_COMPRESSION = 30.0


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Timers:
    """Real-world seconds; the plan divides each by the compression."""

    compression: float = MAX_COMPRESSION
    consolidate_after: float = 300.0  # Karpenter's NodePool disruption.consolidateAfter
    startup: float = 180.0  # a replica's model load: bound to Ready
    hpa: Behavior = field(default_factory=Behavior)

    def replay(self, seconds: float) -> float:
        return seconds / self.compression


@dataclass(frozen=True)
class Step:
    at: float  # replay seconds from the start of the measured day
    service: str
    replicas: int


@dataclass(frozen=True)
class Plan:
    services: tuple[Service, ...]
    first_bucket: int
    buckets: int
    timers: Timers
    initial: Mapping[str, int]
    steps: tuple[Step, ...]

    @property
    def duration(self) -> float:
        return self.buckets * self.timers.replay(BUCKET_SECONDS)

    def trace_seconds(self, replay: float) -> float:
        return self.first_bucket * BUCKET_SECONDS + replay * self.timers.compression

    def replicas(self, service: str) -> list[tuple[float, int]]:
        """(replay time, replicas) from 0, one point a change."""
        points = [(0.0, self.initial[service])]
        points += [(s.at, s.replicas) for s in self.steps if s.service == service]
        return points

    def gpus_over_time(self) -> list[tuple[float, dict[int, int]]]:
        """(replay time, GPUs asked for by GPU size) at each change."""
        current = dict(self.initial)
        by_size = {s.name: s.gpus for s in self.services}
        times = [0.0, *sorted({s.at for s in self.steps})]
        out = []
        steps = iter(self.steps)
        pending = next(steps, None)
        for t in times:
            while pending is not None and pending.at <= t:
                current[pending.service] = pending.replicas
                pending = next(steps, None)
            demand: dict[int, int] = {}
            for name, replicas in current.items():
                if by_size[name]:
                    demand[by_size[name]] = demand.get(by_size[name], 0) + replicas
            out.append((t, demand))
        return out

    def summary(self) -> dict[str, object]:
        peaks = {s.name: max(r for _, r in self.replicas(s.name)) for s in self.services}
        lows = {s.name: min(r for _, r in self.replicas(s.name)) for s in self.services}
        return {
            "trace_hours": round(self.buckets * BUCKET_SECONDS / 3600, 2),
            "first_bucket_clock": f"{self.first_bucket * BUCKET_SECONDS // 3600:02d}:00",
            "compression": self.timers.compression,
            "replay_seconds": round(self.duration),
            "hpa_sync_s": round(self.timers.replay(self.timers.hpa.sync_period), 3),
            "hpa_scale_down_window_s": round(self.timers.replay(self.timers.hpa.down_window), 3),
            "consolidate_after_s": round(self.timers.replay(self.timers.consolidate_after), 3),
            "startup_s": round(self.timers.replay(self.timers.startup), 3),
            "scale_steps": len(self.steps),
            "replicas_low_peak": {n: [lows[n], peaks[n]] for n in peaks},
            "gpus_per_replica": {s.name: s.gpus for s in self.services},
        }


def make_plan(
    rates: Mapping[str, Rates],
    services: Sequence[Service],
    *,
    first_bucket: int = 0,
    buckets: int = 144,
    timers: Timers | None = None,
) -> Plan:
    timers = timers or Timers()
    if not 1 <= timers.compression <= MAX_COMPRESSION:
        raise PlanError(f"compression {timers.compression} is outside 1..{MAX_COMPRESSION}")
    per_day = next(iter(rates.values())).per_bucket
    if first_bucket < 0 or buckets < 1 or first_bucket + buckets > len(per_day):
        raise PlanError(f"buckets {first_bucket}..{first_bucket + buckets} are not within the day")
    behavior = timers.hpa.compressed(timers.compression)
    scalers = {
        s.name: Scaler(s.min_replicas, s.max_replicas, s.target_rps, behavior) for s in services
    }
    # The day opens with every service at its first bucket's replicas (the warm-up).
    start = first_bucket * BUCKET_SECONDS
    initial = {s.name: scalers[s.name].step(0.0, rate_of(s, rates, start)) for s in services}
    steps: list[Step] = []
    duration = buckets * timers.replay(BUCKET_SECONDS)
    sync = behavior.sync_period
    tick = 1
    while tick * sync < duration:
        now = tick * sync
        trace_t = start + now * timers.compression
        for s in services:
            before = scalers[s.name].replicas
            after = scalers[s.name].step(now, rate_of(s, rates, trace_t))
            if after != before:
                steps.append(Step(round(now, 3), s.name, after))
        tick += 1
    return Plan(tuple(services), first_bucket, buckets, timers, initial, tuple(steps))
