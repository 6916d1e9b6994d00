"""What B7 asks of the cluster over its day: every service's replicas, step by step, as an
HPA would set them from the trace's rates. Pure; the same plan drives every lane and repeat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.replay.hpa import Scaler
from bench.replay.plan import Plan, PlanError, Step, Timers
from bench.serving.load import BUCKET_SECONDS, Rates, Service, rate_of


def make_plan(
    rates: Mapping[str, Rates],
    services: Sequence[Service],
    *,
    first_bucket: int = 0,
    buckets: int = 144,
    timers: Timers | None = None,
) -> Plan:
    timers = timers or Timers()
    timers.check()
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
    shapes = tuple(s.shape for s in services)
    return Plan(shapes, start, buckets * BUCKET_SECONDS, timers, initial, tuple(steps))


def summary(plan: Plan) -> dict[str, object]:
    """The plan's summary with each service's replicas, low and peak."""
    peaks = {s.name: max(r for _, r in plan.replicas(s.name)) for s in plan.services}
    lows = {s.name: min(r for _, r in plan.replicas(s.name)) for s in plan.services}
    return {
        **plan.summary(),
        "replicas_low_peak": {n: [lows[n], peaks[n]] for n in peaks},
        "gpus_per_replica": {s.name: s.gpus for s in plan.services},
    }
