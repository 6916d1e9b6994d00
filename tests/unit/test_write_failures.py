"""A write that keeps failing is retried and reported, and the reporting itself can fail
(the apiserver is down, which is why the write failed) without stopping the writer."""

from __future__ import annotations

from typing import cast

import aiohttp
import pytest

from schedpolicy.shell.deletion_cost.cost_writer import TRANSIENT_FAILURES_BEFORE_EVENT
from schedpolicy.shell.kube import Kube, ObjectRef
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.view.cluster import ClusterView
from tests.unit.test_cluster import pod


class UnreachableEvents:
    def __init__(self) -> None:
        self.attempts: list[tuple[str, str]] = []

    async def post_event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.attempts.append((reason, message))
        raise aiohttp.ClientConnectionError("connection refused")


@pytest.mark.parametrize("failures", [1, TRANSIENT_FAILURES_BEFORE_EVENT, 12])
async def test_persistent_write_failures_report_once_and_never_raise(failures: int) -> None:
    view = ClusterView()
    view.upsert_pod(pod("p1", "u1"))
    events = UnreachableEvents()
    reconciler = Reconciler(cast(Kube, events), view)
    for _ in range(failures):
        await reconciler.costs.transient_failure("u1", "ClientConnectorError")

    reported = [r for r, _ in events.attempts]
    assert reported == (["CostWriteFailed"] if failures >= TRANSIENT_FAILURES_BEFORE_EVENT else [])
    assert reconciler.queue.has_retry("u1")  # and a retry is scheduled
    reconciler.queue.cancel("u1")
