from __future__ import annotations

import pytest

from schedpolicy.core.wording import count, pending_message


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 pods"), (1, "1 pod"), (2, "2 pods"), (11, "11 pods")]
)
def test_count(n: int, text: str) -> None:
    assert count(n, "pod") == text


@pytest.mark.parametrize(
    ("pods", "waiting", "unschedulable"),
    [
        (
            ["ns/a"],
            "1 pod has waited over 60s for sp, which has not tried to schedule it (ns/a);"
            " is the secondary scheduler running?",
            "1 pod is unschedulable on sp for over 60s (ns/a)",
        ),
        (
            ["ns/b", "ns/a", "ns/d", "ns/c"],
            "4 pods have waited over 60s for sp, which has not tried to schedule them"
            " (ns/a, ns/b, ns/c); is the secondary scheduler running?",
            "4 pods are unschedulable on sp for over 60s (ns/a, ns/b, ns/c)",
        ),
    ],
)
def test_pending_messages_agree_in_number(
    pods: list[str], waiting: str, unschedulable: str
) -> None:
    assert pending_message("SchedulerNotScheduling", pods, "sp", 60) == waiting
    assert pending_message("PodsUnschedulable", pods, "sp", 60) == unschedulable
