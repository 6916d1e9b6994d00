"""A write refused because the pod moved under it wrote nothing, so it must not hold the pod's
next write back by the policy's minimum interval."""

from __future__ import annotations

from typing import Any, cast

import pytest

from schedpolicy.core.deletion_cost.costs import CostPlan
from schedpolicy.shell.clock import Clock
from schedpolicy.shell.deletion_cost.cost_writer import CostWriter
from schedpolicy.shell.events import Events
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.kube_errors import Gone, PreconditionFailed
from schedpolicy.view.cluster import ClusterView
from tests.unit.test_cluster import pod


class RefusingKube:
    def __init__(self, err: Exception) -> None:
        self.err = err

    async def set_pod_cost(self, *args: Any, **kwargs: Any) -> str:
        raise self.err


def writer(err: Exception, now: float) -> CostWriter:
    view = ClusterView()
    view.upsert_pod(pod("p1", "u1"))
    return CostWriter(
        cast(Kube, RefusingKube(err)),
        view,
        cast(Events, None),
        replan=lambda _: CostPlan("write", "100", "changed", policy="p"),
        retry=lambda uid, seconds: None,
        failures_changed=lambda: None,
        clock=Clock(monotonic=lambda: now),
    )


@pytest.mark.parametrize(
    ("err", "before", "after"),
    [
        (PreconditionFailed(422, "test failed: resourceVersion"), None, None),
        (PreconditionFailed(409, "conflict"), 50.0, 50.0),
        (Gone(404, "not found"), 50.0, 50.0),
    ],
    ids=["first-write-conflict", "re-cost-conflict", "gone"],
)
async def test_a_refused_write_keeps_the_last_real_write_time(
    err: Exception, before: float | None, after: float | None
) -> None:
    costs = writer(err, now=100.0)
    if before is not None:
        costs.last_write["u1"] = before
    await costs.write("u1")
    assert costs.last_write.get("u1") == after
