from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from schedpolicy.core.installs import judge, live_controller
from schedpolicy.core.timestamps import to_nanos

NOW = to_nanos(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))


def lease(
    namespace: str,
    created: str = "2026-12-01T10:00:00Z",
    renewed: str | None = "2026-12-01T11:59:55.000000Z",
    holder: str = "pod-1",
    duration: Any = 15,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "schedpolicy", "namespace": namespace, "creationTimestamp": created},
        "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration},
    }


@pytest.mark.parametrize(
    ("body", "live"),
    [
        (lease("a"), True),
        (lease("a", renewed="2026-12-01T11:59:45.000000Z"), False),  # expired exactly now
        (lease("a", renewed="2026-12-01T11:59:45.000001Z"), True),
        (lease("a", holder=""), False),  # released
        (lease("a", renewed=None), False),
        (lease("a", duration="15"), False),  # malformed: not trusted
    ],
)
def test_which_leases_are_live(body: dict[str, Any], live: bool) -> None:
    assert (live_controller(body, NOW) is not None) is live


def test_alone_we_write() -> None:
    verdict = judge([lease("ours")], "ours", NOW)
    assert verdict.may_write
    assert verdict.others == ()


def test_the_oldest_install_writes_and_the_newer_defers() -> None:
    leases = [lease("old", created="2026-11-01T00:00:00Z"), lease("new")]
    old, new = judge(leases, "old", NOW), judge(leases, "new", NOW)
    assert old.may_write
    assert [c.namespace for c in old.others] == ["new"]
    assert not new.may_write
    assert new.defer_to is not None
    assert new.defer_to.namespace == "old"
    assert (
        new.defer_to.describe("schedpolicy")
        == "namespace old (Lease old/schedpolicy, held by pod-1)"
    )


def test_same_age_the_namespace_decides() -> None:
    leases = [lease("b"), lease("a")]
    assert judge(leases, "a", NOW).may_write
    assert not judge(leases, "b", NOW).may_write


def test_without_a_lease_of_its_own_a_controller_defers_to_any_live_one() -> None:
    assert not judge([lease("other")], "ours", NOW).may_write
    assert judge([lease("other", holder="")], "ours", NOW).may_write
