"""The two series the alerts read that no counter gives: which replica leads, and each
policy's conditions as the leader last decided them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from prometheus_client import REGISTRY

from schedpolicy.core.policy.status import Observation
from schedpolicy.shell import metrics
from schedpolicy.shell.events import Events
from schedpolicy.shell.kube import Kube
from schedpolicy.shell.status_writer import StatusWriter
from schedpolicy.view.records import PolicyObject


class RecordingKube:
    def __init__(self) -> None:
        self.patched: list[str] = []

    async def patch_policy_status(self, name: str, status: dict[str, Any]) -> None:
        self.patched.append(name)

    async def post_event(self, *args: object) -> None:
        pass


def condition(policy: str, kind: str) -> float | None:
    return REGISTRY.get_sample_value(
        "schedpolicy_policy_condition", {"policy": policy, "type": kind}
    )


def policy(name: str) -> PolicyObject:
    return PolicyObject(
        name=name, uid=f"uid-{name}", generation=1, status={}, policy=None, error=None
    )


async def test_the_leader_exports_each_policys_conditions_and_drops_deleted_ones() -> None:
    kube = RecordingKube()
    writer = StatusWriter(cast(Kube, kube), Events(cast(Kube, kube)))
    now = datetime(2026, 12, 1, tzinfo=UTC)
    healthy = Observation(name="a", generation=1)
    degraded = Observation(name="b", generation=1, degraded=["3 pods wait on the scheduler"])

    await writer.write_all([policy("a"), policy("b")], [healthy, degraded], now)
    assert kube.patched == ["a", "b"]
    assert (condition("a", "Degraded"), condition("a", "Ready")) == (0, 1)
    assert condition("b", "Degraded") == 1
    assert condition("b", "Conflicting") == 0

    await writer.write_all([policy("a")], [healthy], now)
    assert condition("b", "Degraded") is None  # its series went with it
    assert condition("a", "Ready") == 1


def test_losing_the_lease_zeroes_leader_and_clears_the_conditions() -> None:
    metrics.set_leader(True)
    metrics.set_policy_conditions({"a": {"Degraded": "True"}})
    assert REGISTRY.get_sample_value("schedpolicy_leader") == 1

    metrics.set_leader(False)
    assert REGISTRY.get_sample_value("schedpolicy_leader") == 0
    assert condition("a", "Degraded") is None


def test_known_series_exist_at_zero_before_anything_happens() -> None:
    metrics.zero_controller_series()
    for name, labels in [
        ("schedpolicy_cost_writes_total", {"result": "error"}),
        ("schedpolicy_node_label_writes_total", {"result": "ok"}),
        ("schedpolicy_metric_samples_rejected_total", {"reason": "stale"}),
        ("schedpolicy_cost_skipped_total", {"reason": "foreign-cost"}),
    ]:
        assert REGISTRY.get_sample_value(name, labels) is not None, (name, labels)
    assert REGISTRY.get_sample_value("schedpolicy_leader") == 0


def test_unlabelled_nodes_report_every_reason_and_labelled_every_policy() -> None:
    metrics.set_unlabelled({"refused": 2})
    unlabelled = {
        r: REGISTRY.get_sample_value("schedpolicy_gpu_nodes_unlabelled", {"reason": r})
        for r in metrics.UNLABELLED_REASONS
    }
    assert unlabelled == {"no-allocatable-gpus": 0, "unknown-gpu": 0, "refused": 2}
    metrics.set_labelled(["gpu", "other"], {"gpu": 3})
    labelled = {
        p: REGISTRY.get_sample_value("schedpolicy_gpu_nodes_labelled", {"policy": p})
        for p in ("gpu", "other")
    }
    assert labelled == {"gpu": 3, "other": 0}
