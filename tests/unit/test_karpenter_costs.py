"""karpenter.sh/disruption-cost: the same decision, scaled so that Karpenter's clamp keeps
costs apart, written beside pod-deletion-cost; and who else writes the cost."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from schedpolicy.core.deletion_cost.api import KARPENTER_VALUE_MAX, DeletionCost
from schedpolicy.core.deletion_cost.costs import CostDecision, PodCostState, plan
from schedpolicy.core.deletion_cost.patches import cost_patch, cost_removal_patch
from schedpolicy.core.policy.status import Observation, verdicts
from schedpolicy.core.wellknown import COST_ANNOTATION, KARPENTER_COST_ANNOTATION

CAPACITY = {"type": "CapacityType", "capacityType": {"spot": -500}}


def spec(**extra: Any) -> DeletionCost:
    return DeletionCost.model_validate({"signals": [CAPACITY], **extra})


KARPENTER = spec(karpenterDisruptionCost={})
SCALED = spec(karpenterDisruptionCost={"scale": 1000})
TAKE_OVER = spec(karpenterDisruptionCost={}, takeOver=True)


def decided(cost_spec: DeletionCost, final: int = -500) -> CostDecision:
    return CostDecision(
        signals=(),
        raw=final,
        bucketed=final,
        final=final,
        bounds=(cost_spec.min, cost_spec.max),
        bucket=100,
        karpenter=cost_spec.karpenter_value(final),
        karpenter_scale=cost_spec.karpenter_disruption_cost.scale
        if cost_spec.karpenter_disruption_cost
        else 0,
    )


def pod(
    current: str | None = None,
    karpenter: str | None = None,
    ours: bool = True,
    karpenter_ours: bool = True,
) -> PodCostState:
    return PodCostState(
        replicaset_owned=True,
        active=True,
        scheduled=True,
        current=current,
        ours=ours,
        karpenter_current=karpenter,
        karpenter_ours=karpenter_ours,
    )


# -500 is 500 above the default min of -1000.
K500 = str(500 * 2**19)


@pytest.mark.parametrize(
    ("state", "cost_spec", "action", "reason", "karpenter"),
    [
        (pod(), KARPENTER, "write", "changed", K500),
        (pod("-500", K500), KARPENTER, "none", "unchanged", None),
        # The deletion cost is right but Karpenter's is missing or stale: both are written.
        (pod("-500"), KARPENTER, "write", "changed", K500),
        (pod("-500", "7"), KARPENTER, "write", "changed", K500),
        (pod("-500", K500), SCALED, "write", "changed", "500000"),
        # Someone else's disruption cost is theirs, unless the policy takes over.
        (pod("-500", "7", karpenter_ours=False), KARPENTER, "none", "foreign-cost", None),
        (pod("-500", "7", karpenter_ours=False), TAKE_OVER, "write", "changed", K500),
        (pod("100", ours=False), KARPENTER, "none", "foreign-cost", None),
        # Without the opt-in, a disruption cost on the pod is nobody's business here.
        (pod("-500", "7", karpenter_ours=False), spec(), "none", "unchanged", None),
    ],
)
def test_plan_writes_both_costs_together(
    state: PodCostState, cost_spec: DeletionCost, action: str, reason: str, karpenter: str | None
) -> None:
    result = plan(state, "p", cost_spec, decided(cost_spec))
    assert (result.action, result.reason, result.karpenter) == (action, reason, karpenter)


@pytest.mark.parametrize(
    ("state", "karpenter"),
    [
        (pod("-500", K500), K500),
        (pod("-500", K500, karpenter_ours=False), None),
        (pod("-500"), None),
    ],
)
def test_removal_takes_only_our_own_disruption_cost(
    state: PodCostState, karpenter: str | None
) -> None:
    result = plan(state, None, None, None)
    assert (result.action, result.value, result.karpenter) == ("remove", "-500", karpenter)


@pytest.mark.parametrize(
    ("bounds", "scale", "ok"),
    [
        ((-1000, 1000), 2**19, True),
        ((-1000, 1000), KARPENTER_VALUE_MAX // 2000, True),
        ((-1000, 1000), KARPENTER_VALUE_MAX // 2000 + 1, False),
        ((-100000, 0), KARPENTER_VALUE_MAX // 100000, True),
        ((-100000, 0), KARPENTER_VALUE_MAX // 100000 + 1, False),
    ],
)
def test_scale_must_keep_costs_inside_karpenters_clamp(
    bounds: tuple[int, int], scale: int, ok: bool
) -> None:
    low, high = bounds
    body = {"min": low, "max": high, "karpenterDisruptionCost": {"scale": scale}}
    if ok:
        spec(**body)
        return
    with pytest.raises(ValidationError, match=r"karpenterDisruptionCost\.scale: .* at most \d+"):
        spec(**body)


def karpenter_per_pod(value: int) -> float:
    """Karpenter's own arithmetic: EvictionCost, then the floor at 0 that
    ComputeRescheduleDisruptionCost applies to each pod."""
    return max(0.0, min(10.0, max(-10.0, 1 + value / 2**27)))


def test_karpenter_prices_every_cost_apart_and_above_zero() -> None:
    # Negative per-pod costs would all count as 0 to Karpenter, and costs above 9 x 2^27
    # would be clamped together: the default mapping stays between.
    costs = range(-1000, 1001, 100)
    per_pod = [karpenter_per_pod(KARPENTER.karpenter_value(c) or 0) for c in costs]
    assert per_pod == sorted(set(per_pod))
    assert per_pod[0] == 1.0
    assert per_pod[-1] < 10


def test_the_explanation_shows_the_disruption_cost() -> None:
    lines = decided(KARPENTER).explain()
    assert lines[-1].startswith(f"karpenter.sh/disruption-cost: (-500 - -1000) x {2**19} = {K500}")


def test_one_patch_sets_both_annotations() -> None:
    assert cost_patch("u1", "-5", has_annotations=False, karpenter="-50") == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {COST_ANNOTATION: "-5", KARPENTER_COST_ANNOTATION: "-50"},
        },
    ]
    ops = cost_patch("u1", "-5", has_annotations=True, karpenter="-50")
    assert [o["path"] for o in ops[1:]] == [
        "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost",
        "/metadata/annotations/karpenter.sh~1disruption-cost",
    ]


def test_removal_tests_each_value_it_removes() -> None:
    ops = cost_removal_patch("u1", "-5", "-50")
    assert [(o["op"], o["path"].rsplit("/", 1)[-1]) for o in ops] == [
        ("test", "uid"),
        ("test", "controller.kubernetes.io~1pod-deletion-cost"),
        ("remove", "controller.kubernetes.io~1pod-deletion-cost"),
        ("test", "karpenter.sh~1disruption-cost"),
        ("remove", "karpenter.sh~1disruption-cost"),
    ]


def test_another_writer_makes_the_policy_conflicting_by_name() -> None:
    obs = Observation("p", 1, foreign_writers={"karpenter": 3, "kubectl-annotate": 1})
    conflicting = next(v for v in verdicts(obs) if v.type == "Conflicting")
    assert (conflicting.status, conflicting.reason) == ("True", "ForeignCostWriter")
    assert "4 pods" in conflicting.message
    assert conflicting.message.index("3 pods by karpenter") < conflicting.message.index(
        "1 pod by kubectl-annotate"
    )
