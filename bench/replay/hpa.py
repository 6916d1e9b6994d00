"""The replicas an HorizontalPodAutoscaler would ask for, from a request rate. Pure.

B7 does not run kube-controller-manager's HPA controller: that needs a metrics API (an
aggregated custom or external metrics server) that the harness does not serve. This follows
the controller's documented algorithm for an External metric with an AverageValue target,
which is how a serving Deployment is scaled on its request rate:

- the usage ratio is rate / (target x current replicas); within the tolerance (0.1) nothing
  changes, otherwise the recommendation is ceil(rate / target);
- stabilization: a scale-up takes the least recommendation of its window (0 s by default),
  a scale-down the greatest of its window (300 s by default);
- rate rules: by default up by at most max(4 pods, 100%) per 15 s, down by at most 100% per
  15 s, each measured from the replicas at the start of the period;
- then min and max replicas.

Every timer is in the caller's clock: B7 divides HPA's seconds by its compression. Since the
rate comes from the trace alone, the replicas over time are the same in every lane.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

PolicyKind = Literal["Pods", "Percent"]


@dataclass(frozen=True)
class Rule:
    kind: PolicyKind
    value: int
    period: float  # seconds


@dataclass(frozen=True)
class Behavior:
    """HPA's autoscaling/v2 defaults, in seconds of the caller's clock."""

    up_window: float = 0.0
    down_window: float = 300.0
    up_rules: tuple[Rule, ...] = (Rule("Pods", 4, 15.0), Rule("Percent", 100, 15.0))
    down_rules: tuple[Rule, ...] = (Rule("Percent", 100, 15.0),)
    tolerance: float = 0.1
    sync_period: float = 15.0

    def compressed(self, factor: float) -> Behavior:
        def rules(rs: Sequence[Rule]) -> tuple[Rule, ...]:
            return tuple(Rule(r.kind, r.value, r.period / factor) for r in rs)

        return Behavior(
            self.up_window / factor,
            self.down_window / factor,
            rules(self.up_rules),
            rules(self.down_rules),
            self.tolerance,
            self.sync_period / factor,
        )


@dataclass
class Scaler:
    """One HPA's state: its recommendations and its scale events."""

    min_replicas: int
    max_replicas: int
    target: float  # requests per second per replica
    behavior: Behavior = field(default_factory=Behavior)
    replicas: int = 0
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    events: list[tuple[float, int]] = field(default_factory=list)  # (time, change)

    def raw(self, rate: float) -> int:
        """The recommendation before stabilization and rate rules."""
        if self.replicas == 0:
            return max(self.min_replicas, math.ceil(rate / self.target))
        usage = rate / (self.target * self.replicas)
        if abs(1.0 - usage) <= self.behavior.tolerance:
            return self.replicas
        return math.ceil(rate / self.target)

    def step(self, now: float, rate: float) -> int:
        """One sync at `now`: the replicas it sets (unchanged when nothing is due)."""
        wanted = self.raw(rate)
        if self.replicas == 0:
            self.replicas = min(self.max_replicas, wanted)
            self.recommendations.append((now, wanted))
            return self.replicas
        stable = self._stabilized(now, wanted)
        limited = self._limited(now, min(max(stable, self.min_replicas), self.max_replicas))
        if limited != self.replicas:
            self.events.append((now, limited - self.replicas))
            self.replicas = limited
        return self.replicas

    def _stabilized(self, now: float, wanted: int) -> int:
        b = self.behavior
        up = down = wanted
        kept = []
        for at, value in self.recommendations:
            if at > now - max(b.up_window, b.down_window):
                kept.append((at, value))
            if at > now - b.up_window:
                up = min(up, value)
            if at > now - b.down_window:
                down = max(down, value)
        kept.append((now, wanted))
        self.recommendations = kept
        return min(max(self.replicas, up), down)

    def _changed_within(self, now: float, period: float) -> tuple[int, int]:
        added = sum(c for at, c in self.events if at > now - period and c > 0)
        removed = -sum(c for at, c in self.events if at > now - period and c < 0)
        return added, removed

    def _limited(self, now: float, wanted: int) -> int:
        current = self.replicas
        if wanted > current:
            limit = -math.inf
            for rule in self.behavior.up_rules:
                added, removed = self._changed_within(now, rule.period)
                start = current - added + removed
                proposed = (
                    start + rule.value
                    if rule.kind == "Pods"
                    else math.ceil(start * (1 + rule.value / 100))
                )
                limit = max(limit, proposed)
            return min(wanted, max(int(limit), current))
        if wanted < current:
            floor = math.inf
            for rule in self.behavior.down_rules:
                added, removed = self._changed_within(now, rule.period)
                start = current + removed - added
                proposed = (
                    start - rule.value
                    if rule.kind == "Pods"
                    else int(start * (1 - rule.value / 100))
                )
                floor = min(floor, proposed)
            return max(wanted, min(int(floor), current))
        return current
