"""Policy status reports read every pod, so they keep to a share of the controller's time:
on a large cluster they no longer starve the cost writes they report on."""

from __future__ import annotations

import itertools
from typing import cast

import pytest

from schedpolicy.shell.clock import Clock
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.reconciler import STATUS_SHARE, Reconciler, status_gap
from schedpolicy.view.cluster import ClusterView


@pytest.mark.parametrize(
    ("interval", "took", "gap"),
    [
        (2.0, 0.0, 2.0),  # a small cluster: the configured interval
        (2.0, 0.1, 2.0),
        (2.0, 0.2, 2.0),  # exactly the share
        (2.0, 0.8, 8.0),  # 150k pods: about a tenth of the time
        (30.0, 1.0, 30.0),  # a longer interval stands
    ],
)
def test_the_gap_is_the_interval_or_what_keeps_reports_to_their_share(
    interval: float, took: float, gap: float
) -> None:
    assert status_gap(interval, took) == pytest.approx(gap)


async def test_a_slow_report_pushes_the_next_one_back() -> None:
    now = [100.0]
    reports: list[float] = []
    reconciler = Reconciler(
        cast(Kube, object()), ClusterView(), clock=Clock(monotonic=lambda: now[0])
    )

    async def report() -> None:
        reports.append(now[0])
        now[0] += 1.5  # the report's own time

    reconciler.reconcile_policy_statuses = report  # type: ignore[method-assign]
    for _ in range(40):
        reconciler._status_dirty()
        await reconciler.reconcile_once()
        now[0] += 1.0
    gaps = [b - a for a, b in itertools.pairwise(reports)]
    assert len(gaps) >= 2
    assert min(gaps) >= 1.5 / STATUS_SHARE  # at a fixed 2 s, every 2.5 s: 60% of the time
