"""PodCondition: points while a named pod condition is True. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from schedpolicy.core.deletion_cost.signals.base import PodFacts, Score, SignalKind
from schedpolicy.core.policy.model import Model, Points


class PodConditionSignal(Model):
    """Points while a named pod condition (for example a readiness gate such as
    `example.com/cache-warm`) is True. Never derived from elapsed time."""

    condition_type: Annotated[str, Field(min_length=1, max_length=316)] = Field(
        description="The pod condition type, for example example.com/cache-warm."
    )
    points: Points = Field(description="Points while the condition is True.")


def score(params: PodConditionSignal, facts: PodFacts, now: datetime) -> Score:
    status = facts.conditions.get(params.condition_type)
    if status == "True":
        return Score(params.points, f"condition {params.condition_type} is True")
    return Score(0, f"condition {params.condition_type} is {status or 'absent'}")


KIND = SignalKind("PodCondition", "podCondition", PodConditionSignal, score)
