from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from localcluster.binaries import REPO
from schedpolicy.core.deletion_cost.api import DeletionCost
from schedpolicy.core.deletion_cost.costs import (
    CostDecision,
    PodCostState,
    bucket_down,
    decide,
    plan,
)
from schedpolicy.core.deletion_cost.samples import Rejection, Sample
from schedpolicy.core.deletion_cost.signals.base import CostInputs, ZoneSpread
from schedpolicy.core.deletion_cost.signals.capacity_type import capacity_type
from schedpolicy.core.deletion_cost.signals.metric import MetricSignal

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ZONE = "topology.kubernetes.io/zone"


def spec(*signals: dict[str, Any], **extra: Any) -> DeletionCost:
    return DeletionCost.model_validate({"signals": list(signals), **extra})


def on(
    node_labels: dict[str, str] | None = None,
    *,
    zone_counts: dict[str, int] | None = None,
    eligible_zones: frozenset[str] = frozenset(),
    zone_rank: int | None = None,
    **kw: Any,
) -> CostInputs:
    spread = ZoneSpread(zone_counts or {}, eligible_zones, zone_rank)
    return CostInputs(
        node_name="n1", node_labels=node_labels or {}, pod_uid="uid-1", spread=spread, **kw
    )


CAPACITY = {
    "type": "CapacityType",
    "capacityType": {"spot": -500, "onDemand": 100, "reserved": 300},
}


@pytest.mark.parametrize(
    ("labels", "points"),
    [
        ({"karpenter.sh/capacity-type": "spot"}, -500),
        ({"karpenter.sh/capacity-type": "on-demand"}, 100),
        ({"karpenter.sh/capacity-type": "reserved"}, 300),
        ({"eks.amazonaws.com/capacityType": "SPOT"}, -500),
        ({"eks.amazonaws.com/capacityType": "ON_DEMAND"}, 100),
        ({"eks.amazonaws.com/capacityType": "CAPACITY_BLOCK"}, 0),  # unknown value
        ({"karpenter.sh/capacity-type": "weird"}, 0),
        ({}, 0),
    ],
)
def test_capacity_type_signal(labels: dict[str, str], points: int) -> None:
    decision = decide(spec(CAPACITY, bucket=1), on(labels), NOW)
    assert decision.signals[0].points == points
    assert decision.final == points


def test_karpenter_label_wins_over_eks() -> None:
    kind, source = capacity_type(
        {"karpenter.sh/capacity-type": "spot", "eks.amazonaws.com/capacityType": "ON_DEMAND"}
    )
    assert (kind, source) == (
        "spot",
        "karpenter.sh/capacity-type=spot,"
        " over the disagreeing eks.amazonaws.com/capacityType=ON_DEMAND",
    )
    agreeing = {"karpenter.sh/capacity-type": "spot", "eks.amazonaws.com/capacityType": "SPOT"}
    assert capacity_type(agreeing) == ("spot", "karpenter.sh/capacity-type=spot")


def test_unbound_pod_scores_zero_everywhere() -> None:
    decision = decide(spec(CAPACITY, {"type": "NodeConsolidation"}), CostInputs(), NOW)
    assert [s.points for s in decision.signals] == [0, 0]


@pytest.mark.parametrize(
    ("alloc", "used", "points"),
    [
        (4000, 0, 0),
        (4000, 1000, 100),
        (4000, 2000, 200),
        (4000, 4000, 400),
        (4000, 9000, 400),  # overcommitted counts as full
        (4000, 1, 0),  # floor
        (0, 500, 0),  # no allocatable CPU: treated as empty
    ],
)
def test_node_consolidation(alloc: int, used: int, points: int) -> None:
    s = spec({"type": "NodeConsolidation", "nodeConsolidation": {"points": 400}}, bucket=1)
    decision = decide(s, on(allocatable={"cpu": alloc}, requested={"cpu": used}), NOW)
    assert decision.signals[0].points == points


@pytest.mark.parametrize(
    ("zone", "counts", "points"),
    [
        ("a", {"a": 5, "b": 2, "c": 2}, -300),
        ("b", {"a": 5, "b": 2, "c": 2}, 0),
        ("a", {"a": 3, "b": 3, "c": 0}, -300),  # an empty eligible zone counts
        ("a", {"a": 1, "b": 1}, 0),  # balanced
        ("x", {"a": 1, "b": 1, "x": 2}, -100),  # pods in a zone that is no longer eligible
    ],
)
def test_zone_balance(zone: str, counts: dict[str, int], points: int) -> None:
    inputs = on({ZONE: zone}, zone_counts=counts, eligible_zones=frozenset(counts) - {"x"})
    decision = decide(spec({"type": "ZoneBalance"}, bucket=1), inputs, NOW)
    assert decision.signals[0].points == points


def test_zone_balance_without_zone_label() -> None:
    inputs = on({}, zone_counts={"a": 3}, eligible_zones=frozenset({"a"}))
    decision = decide(spec({"type": "ZoneBalance"}), inputs, NOW)
    assert decision.signals[0].points == 0
    assert "no zone" in decision.signals[0].detail


@pytest.mark.parametrize(
    ("status", "points"), [("True", 800), ("False", 0), (None, 0), ("Unknown", 0)]
)
def test_pod_condition(status: str | None, points: int) -> None:
    conditions = {"example.com/cache-warm": status} if status else {}
    s = spec(
        {
            "type": "PodCondition",
            "podCondition": {"conditionType": "example.com/cache-warm", "points": 800},
        }
    )
    assert decide(s, on(conditions=conditions), NOW).final == points


METRIC = {
    "type": "Metric",
    "metric": {
        "annotation": {},
        "maxAgeSeconds": 60,
        "bands": [{"min": 0, "points": 0}, {"min": 10, "points": 200}, {"min": 100, "points": 700}],
    },
}
# Samples are keyed by where they are read from (the default annotation here).
METRIC_SOURCE = MetricSignal.model_validate(METRIC["metric"]).source_key()


@pytest.mark.parametrize(
    ("value", "points"), [(0, 0), (9.9, 0), (10, 200), (99, 200), (100, 700), (1e9, 700)]
)
def test_metric_bands(value: float, points: int) -> None:
    sample = Sample(value, NOW, "uid-1")
    assert decide(spec(METRIC), on(samples={METRIC_SOURCE: sample}), NOW).final == points


def test_metric_below_lowest_band_scores_zero() -> None:
    s = spec({**METRIC, "metric": {**METRIC["metric"], "bands": [{"min": 5, "points": 900}]}})
    assert decide(s, on(samples={METRIC_SOURCE: Sample(1, NOW, None)}), NOW).final == 0


@pytest.mark.parametrize(
    ("found", "reason"),
    [
        (None, "no-sample"),
        (Sample(float("nan"), NOW, "uid-1"), "not-finite"),
        (Sample(-5, NOW, "uid-1"), "negative"),
        (Sample(5, NOW - timedelta(minutes=5), "uid-1"), "stale"),
        (Sample(5, NOW + timedelta(minutes=5), "uid-1"), "future"),
        (Sample(5, NOW, "uid-2"), "wrong-uid"),
        (Rejection("timeout", "no answer in 1s"), "timeout"),
    ],
)
def test_untrusted_sample_holds_the_cost(found: Sample | Rejection | None, reason: str) -> None:
    samples = {METRIC_SOURCE: found} if found is not None else {}
    decision = decide(
        spec(CAPACITY, METRIC), on({"karpenter.sh/capacity-type": "spot"}, samples=samples), NOW
    )
    assert decision.final is None
    assert decision.hold is not None
    assert decision.hold.reason == reason
    assert "keeps the cost it has" in decision.explain()[-1]


@pytest.mark.parametrize(
    ("value", "bucket", "down"),
    [
        (0, 100, 0),
        (99, 100, 0),
        (100, 100, 100),
        (-1, 100, -100),
        (-150, 100, -200),
        (-200, 100, -200),
        (7, 1, 7),
    ],
)
def test_bucket_rounds_towards_minus_infinity(value: int, bucket: int, down: int) -> None:
    assert bucket_down(value, bucket) == down


@pytest.mark.parametrize(
    ("points", "bounds", "final"),
    [
        (-500, (-1000, 1000), -500),
        (-5000, (-1000, 1000), -1000),
        (5000, (-1000, 1000), 1000),
        (1_000_000, (-(2**31), 2**31 - 1), 1_000_000),
        (-1_000_000, (-(2**31), -(2**31)), -(2**31)),  # int32 floor
        (1_000_000, (2**31 - 1, 2**31 - 1), 2**31 - 1),  # int32 ceiling
    ],
)
def test_clamp(points: int, bounds: tuple[int, int], final: int) -> None:
    s = spec(
        {"type": "PodCondition", "podCondition": {"conditionType": "c", "points": points}},
        bucket=100,
        min=bounds[0],
        max=bounds[1],
    )
    assert decide(s, on(conditions={"c": "True"}), NOW).final == final


def test_signals_sum_and_the_explanation_shows_every_step() -> None:
    s = spec(
        CAPACITY,
        {"type": "NodeConsolidation", "nodeConsolidation": {"points": 400}},
        {"type": "ZoneBalance"},
    )
    inputs = on(
        {"karpenter.sh/capacity-type": "spot", ZONE: "a"},
        allocatable={"cpu": 4000},
        requested={"cpu": 1000},
        zone_counts={"a": 4, "b": 2},
        eligible_zones=frozenset({"a", "b"}),
    )
    decision = decide(s, inputs, NOW)
    assert [p.points for p in decision.signals] == [-500, 100, -200]
    assert (decision.raw, decision.bucketed, decision.final) == (-600, -600, -600)
    text = "\n".join(decision.explain())
    for needle in ("spot", "fill 0.25", "zone a holds 4", "sum -600", "clamped to [-1000, 1000]"):
        assert needle in text


def test_ties_give_equal_costs() -> None:
    s = spec(CAPACITY)
    a = decide(s, on({"karpenter.sh/capacity-type": "spot"}), NOW)
    b = decide(s, on({"eks.amazonaws.com/capacityType": "SPOT"}), NOW)
    assert a.final == b.final == -500


def test_zones_tied_for_least_filled_score_alike() -> None:
    counts = {"a": 3, "b": 1, "c": 1}
    s = spec({"type": "ZoneBalance"}, bucket=1)
    points = {
        zone: decide(s, on({ZONE: zone}, zone_counts=counts, eligible_zones=frozenset(counts)), NOW)
        .signals[0]
        .points
        for zone in counts
    }
    assert points == {"a": -200, "b": 0, "c": 0}


def test_consolidation_is_exact_integer_arithmetic() -> None:
    # As floats, 700 x (700/1000) is 489.99999999999994; floor of that would lose a point.
    s = spec({"type": "NodeConsolidation", "nodeConsolidation": {"points": 700}}, bucket=10)
    decision = decide(s, on(allocatable={"cpu": 1000}, requested={"cpu": 700}), NOW)
    assert (decision.signals[0].points, decision.final) == (490, 490)


def test_a_sum_beyond_int32_is_clamped_to_int32() -> None:
    big = [
        {"type": "PodCondition", "podCondition": {"conditionType": c, "points": 2**30}}
        for c in ("x", "y", "z")
    ]
    s = spec(*big, bucket=1, min=-(2**31), max=2**31 - 1)
    decision = decide(s, on(conditions={"x": "True", "y": "True", "z": "True"}), NOW)
    assert (decision.raw, decision.final) == (3 * 2**30, 2**31 - 1)


@pytest.mark.parametrize(
    ("pod", "capacity", "fill_mcpu", "cost"),
    [
        ("web-a", "spot", 300, -400),
        ("web-b", "on-demand", 100, 0),
        ("web-c", "on-demand", 800, 300),
    ],
)
def test_the_readme_worked_example(pod: str, capacity: str, fill_mcpu: int, cost: int) -> None:
    # docs/deletion-cost.md: the spot-first-web example policy on three nodes.
    doc = yaml.safe_load((REPO / "examples" / "spot-first-web.yaml").read_text())
    policy = DeletionCost.model_validate(doc["spec"]["deletionCost"])
    inputs = on(
        {"karpenter.sh/capacity-type": capacity},
        allocatable={"cpu": 1000},
        requested={"cpu": fill_mcpu},
    )
    assert decide(policy, inputs, NOW).final == cost, pod


# ---- plan ---------------------------------------------------------------------------------

DECIDED = CostDecision(
    signals=(), raw=-500, bucketed=-500, final=-500, bounds=(-1000, 1000), bucket=100
)
HELD = CostDecision(signals=(), raw=0, bucketed=0, final=None, hold=Rejection("stale", "old"))
SPEC = spec(CAPACITY)
TAKE_OVER = spec(CAPACITY, takeOver=True)


def state(
    current: str | None = None,
    ours: bool = False,
    rs: bool = True,
    active: bool = True,
    scheduled: bool = True,
    leaving: bool = False,
) -> PodCostState:
    return PodCostState(
        replicaset_owned=rs,
        active=active,
        scheduled=scheduled,
        current=current,
        ours=ours,
        node_leaving=leaving,
    )


@pytest.mark.parametrize(
    ("pod", "policy", "cost_spec", "decision", "action", "reason"),
    [
        (state(), "p", SPEC, DECIDED, "write", "changed"),
        (state("-500", ours=True), "p", SPEC, DECIDED, "none", "unchanged"),
        (state("100", ours=True), "p", SPEC, DECIDED, "write", "changed"),
        (state("100", ours=False), "p", SPEC, DECIDED, "none", "foreign-cost"),
        (state("100", ours=False), "p", TAKE_OVER, DECIDED, "write", "changed"),
        (state("-500", ours=False), "p", TAKE_OVER, DECIDED, "none", "unchanged"),
        (state("100", ours=True), "p", SPEC, HELD, "none", "held-stale"),
        (state(), "p", SPEC, HELD, "none", "held-stale"),
        (state("100", ours=True), None, None, None, "remove", "no-policy"),
        (state("100", ours=False), None, None, None, "none", "no-policy"),
        (state("100", ours=True, rs=False), "p", SPEC, None, "remove", "not-replicaset"),
        (state(None, rs=False), "p", SPEC, None, "none", "not-replicaset"),
        (state("100", ours=True, active=False), None, None, None, "none", "terminating"),
        # A node being drained: its pods are about to be evicted, and a write would race that.
        (state(leaving=True), "p", SPEC, DECIDED, "none", "node-leaving"),
        (state("100", ours=True, leaving=True), None, None, None, "none", "node-leaving"),
        (state(scheduled=False), "p", SPEC, DECIDED, "none", "unscheduled"),
        (state("100", ours=True, scheduled=False), "p", SPEC, DECIDED, "none", "unscheduled"),
    ],
)
def test_plan(
    pod: PodCostState,
    policy: str | None,
    cost_spec: DeletionCost | None,
    decision: CostDecision | None,
    action: str,
    reason: str,
) -> None:
    result = plan(pod, policy, cost_spec, decision)
    assert (result.action, result.label) == (action, reason)
    if action == "write":
        assert result.value == "-500"
    if action == "remove":
        assert result.value == pod.current


@pytest.mark.parametrize(
    ("rank", "points"),
    [(0, 0), (1, 0), (2, -100), (3, -200), (4, -300)],
)
def test_zone_balance_ranks_pods_within_the_crowded_zone(rank: int, points: int) -> None:
    """5/2/2: the two oldest pods of the crowded zone are level with the other zones; the
    newer three stand 1, 2 and 3 above them, so removing 3 pods leaves 2/2/2."""
    inputs = on(
        {ZONE: "a"},
        zone_counts={"a": 5, "b": 2, "c": 2},
        eligible_zones=frozenset({"a", "b", "c"}),
        zone_rank=rank,
    )
    assert decide(spec({"type": "ZoneBalance"}, bucket=1), inputs, NOW).signals[0].points == points


def test_zone_balance_water_fills_a_large_scale_down() -> None:
    """30/20/10 scaled to 30: removing the 30 lowest-cost pods leaves 10/10/10."""
    zones = {"a": 30, "b": 20, "c": 10}
    s = spec(
        {"type": "ZoneBalance", "zoneBalance": {"pointsPerExcessPod": -10}}, bucket=1, min=-100000
    )
    scored = []
    for zone, count in zones.items():
        for rank in range(count):
            inputs = on(
                {ZONE: zone}, zone_counts=zones, eligible_zones=frozenset(zones), zone_rank=rank
            )
            decision = decide(s, inputs, NOW)
            scored.append((decision.final, zone, rank))
    # Ties fall to the zone that sorts first; any tie-break gives the same counts here.
    kept = sorted(scored, key=lambda t: (t[0], t[1], -t[2]))[30:]
    assert {z: sum(1 for _, zz, _ in kept if zz == z) for z in zones} == {"a": 10, "b": 10, "c": 10}
