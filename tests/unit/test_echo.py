"""Our own cost write coming back on the watch is recognised, and only that: any other
change in the same event, or a value we did not write, is planned again."""

from __future__ import annotations

from typing import Any, cast

import msgspec
import pytest

from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.shell.feeds import PodFeed
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.view import wire
from schedpolicy.view.cluster import ClusterView, pod_record
from schedpolicy.view.deletion_cost.decisions import PodOutcome
from schedpolicy.view.records import only_cost_changed
from tests.unit.test_cluster import pod

OURS = [
    {
        "manager": "schedpolicy",
        "operation": "Update",
        "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{COST_ANNOTATION}": {}}}},
    }
]


def echoed(**changes: Any) -> dict[str, Any]:
    """Pod p1 after our write of cost 100 (rv 2), with `changes` to its metadata."""
    meta: dict[str, Any] = {
        "resourceVersion": "2",
        "annotations": {COST_ANNOTATION: "100"},
        "managedFields": OURS,
    }
    meta.update(changes)
    return pod("p1", "u1", **meta)


BEFORE = pod("p1", "u1", resourceVersion="1")


@pytest.mark.parametrize(
    ("after", "only_cost"),
    [
        (echoed(), True),
        (echoed(labels={"app": "web"}), False),
        (echoed(annotations={COST_ANNOTATION: "100", "other": "x"}), False),
        ({**echoed(), "spec": {"nodeName": "n2", "containers": []}}, False),
        ({**echoed(), "status": {"phase": "Succeeded"}}, False),
        (echoed(deletionTimestamp="2026-12-01T00:00:00Z"), False),
    ],
    ids=["cost-only", "labels", "another-annotation", "node", "phase", "terminating"],
)
def test_only_cost_changed(after: dict[str, Any], only_cost: bool) -> None:
    assert only_cost_changed(pod_record(BEFORE), pod_record(after)) is only_cost


@pytest.mark.parametrize(
    ("written", "after", "replanned"),
    [
        ("100", echoed(), False),  # our echo: nothing to plan
        ("100", echoed(labels={"app": "web"}), True),  # ours plus someone else's change
        ("200", echoed(), True),  # a value other than ours
        (None, echoed(), True),  # we wrote nothing
    ],
    ids=["echo", "echo-and-labels", "other-value", "not-ours"],
)
async def test_echo_is_not_planned_again(
    written: str | None, after: dict[str, Any], replanned: bool
) -> None:
    view = ClusterView()
    reconciler = Reconciler(cast(Kube, object()), view)
    feed = PodFeed(view, reconciler)
    view.upsert_pod(BEFORE)
    reconciler.outcomes["u1"] = PodOutcome(frozenset({"p"}), "p", 100, None)
    if written is not None:
        reconciler.costs.echoes.wrote("u1", "2", written, seen_version=None)
    reconciler.dirty.take_pods(view)

    feed.upsert(_wire(after))

    assert reconciler.dirty.pending_pod("u1") is replanned
    assert reconciler.costs.echoes.pending("u1") is None  # the echo, or anything newer, is seen
    if not replanned:
        assert reconciler.outcomes["u1"].stored == "100"  # status counts see the new cost


def _wire(body: dict[str, Any]) -> wire.Pod:
    return msgspec.json.decode(msgspec.json.encode(body), type=wire.Pod)
