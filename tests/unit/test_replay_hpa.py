"""B7's scaler follows HPA's algorithm: tolerance, stabilization windows and rate rules."""

from __future__ import annotations

import pytest

from bench.replay.hpa import Behavior, Rule, Scaler


def run(scaler: Scaler, rates: list[tuple[float, float]]) -> list[int]:
    return [scaler.step(t, rate) for t, rate in rates]


@pytest.mark.parametrize(
    ("replicas", "rate", "expected"),
    [
        (10, 1000, 10),  # usage 1.0
        (10, 1090, 10),  # usage 1.09: within the tolerance
        (10, 910, 10),  # usage 0.91: within it
        (10, 1110, 12),  # usage 1.11: ceil(11.1)
        (10, 880, 9),  # usage 0.88: ceil(8.8)
        (3, 0, 0),  # no load: the raw recommendation is 0, min_replicas applies later
    ],
)
def test_the_raw_recommendation_keeps_replicas_within_the_tolerance(
    replicas: int, rate: float, expected: int
) -> None:
    scaler = Scaler(1, 100, target=100, replicas=replicas)
    assert scaler.raw(rate) == expected


def test_a_scale_down_waits_for_the_highest_recommendation_of_its_window() -> None:
    scaler = Scaler(1, 100, target=10, behavior=Behavior(down_window=300))
    assert scaler.step(0, 100) == 10
    # The load halves at t=15; the window still holds the 10 recommended at t=0.
    assert run(scaler, [(15, 50), (150, 50), (299, 50)]) == [10, 10, 10]
    assert scaler.step(301, 50) == 5


def test_a_scale_up_is_at_once_but_at_most_4_pods_or_100_percent_a_period() -> None:
    scaler = Scaler(1, 100, target=10)
    assert scaler.step(0, 20) == 2
    # 2 -> 100 wanted: max(2 + 4, 2 * 2) = 6 this period.
    assert scaler.step(15.5, 1000) == 6
    # Within the same 15 s the period started at 2: no more.
    assert scaler.step(20, 1000) == 6
    # A new period starts from 6: max(10, 12).
    assert scaler.step(31, 1000) == 12
    assert scaler.step(47, 1000) == 24


def test_min_and_max_replicas_bound_every_step() -> None:
    scaler = Scaler(2, 5, target=10, behavior=Behavior(down_window=0))
    assert scaler.step(0, 1000) == 5
    assert run(scaler, [(16, 0), (40, 0)]) == [2, 2]


def test_a_compressed_behavior_divides_every_timer() -> None:
    b = Behavior().compressed(30)
    assert (b.up_window, b.down_window, b.sync_period) == (0, 10, 0.5)
    assert b.up_rules == (Rule("Pods", 4, 0.5), Rule("Percent", 100, 0.5))
    assert b.tolerance == 0.1


def test_a_percent_scale_down_rule_limits_each_period() -> None:
    behavior = Behavior(down_window=0, down_rules=(Rule("Percent", 50, 15),))
    scaler = Scaler(1, 100, target=10, behavior=behavior)
    scaler.step(0, 160)
    # 16 -> 1 wanted: at most half per 15 s.
    assert run(scaler, [(15.5, 10), (20, 10), (31, 10), (47, 10)]) == [8, 8, 4, 2]
