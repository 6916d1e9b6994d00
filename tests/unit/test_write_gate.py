"""The write gate: whether a planned cost write goes out now, later, or not at all."""

from __future__ import annotations

import pytest

from schedpolicy.core.deletion_cost.costs import CostPlan
from schedpolicy.core.deletion_cost.write_gate import Gate, cost_gate, first_in_line

WRITE = CostPlan("write", "100", "changed", policy="p")
REMOVE = CostPlan("remove", "100", "not-governed", policy=None)
NOTHING = CostPlan("none", None, "unchanged", policy="p")


@pytest.mark.parametrize(
    ("plan", "echo", "flight", "last", "interval", "now", "gate"),
    [
        (NOTHING, False, False, None, 0.0, 100.0, Gate("idle", "unchanged")),
        # Nothing to write outranks everything else, even a pending echo.
        (NOTHING, True, True, 99.0, 60.0, 100.0, Gate("idle", "unchanged")),
        (WRITE, False, False, None, 0.0, 100.0, Gate("write", "write")),
        (REMOVE, False, False, None, 0.0, 100.0, Gate("write", "remove")),
        # The same write is already out: wait for the watch, do not send it twice.
        (
            WRITE,
            True,
            False,
            None,
            0.0,
            100.0,
            Gate("sent", "sent; waiting for the watch to show it"),
        ),
        (
            WRITE,
            True,
            True,
            99.0,
            60.0,
            100.0,
            Gate("sent", "sent; waiting for the watch to show it"),
        ),
        # Another write to the pod is on the wire: look again after it returns.
        (
            WRITE,
            False,
            True,
            None,
            0.0,
            100.0,
            Gate("busy", "a write to this pod is on the wire; look again after it"),
        ),
        # Within the policy's minimum interval: wait until it has passed.
        (WRITE, False, False, 90.0, 60.0, 100.0, Gate("wait", "rate-limited", not_before=150.0)),
        # Exactly at the end of the interval the write goes.
        (WRITE, False, False, 40.0, 60.0, 100.0, Gate("write", "write")),
        (WRITE, False, False, 99.9, 0.0, 100.0, Gate("write", "write")),
    ],
    ids=[
        "nothing",
        "nothing-outranks",
        "write",
        "remove",
        "sent",
        "sent-outranks-busy",
        "busy",
        "rate-limited",
        "interval-over",
        "no-interval",
    ],
)
def test_gate(
    plan: CostPlan,
    echo: bool,
    flight: bool,
    last: float | None,
    interval: float,
    now: float,
    gate: Gate,
) -> None:
    got = cost_gate(
        plan, awaiting_echo=echo, in_flight=flight, last_write=last, interval=interval, now=now
    )
    assert got == gate


@pytest.mark.parametrize(
    ("plan", "current", "first"),
    [
        (WRITE, None, True),
        (WRITE, "0", False),
        (REMOVE, None, False),
        (NOTHING, None, False),
        # Only karpenter.sh/disruption-cost changes (the gate owns pod-deletion-cost).
        (CostPlan("write", None, "changed", policy="p", karpenter="5"), None, False),
    ],
    ids=["new-pod", "re-cost", "remove", "nothing", "karpenter-only"],
)
def test_first_in_line(plan: CostPlan, current: str | None, first: bool) -> None:
    assert first_in_line(plan, current) is first
