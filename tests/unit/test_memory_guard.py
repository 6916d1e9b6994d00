"""The controller says it is near its memory limit before the kernel kills it: the limit
read from the cgroup (v1 and v2), the metric, and one warning Event per policy per crossing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from schedpolicy.core.memory_pressure import MemoryReading, parse_limit
from schedpolicy.shell.events import Events
from schedpolicy.shell.kube import Kube, ObjectRef
from schedpolicy.shell.memory_guard import REASON, MemoryGuard, limit_files, policy_refs, read_limit

MIB = 1 << 20


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        ("max\n", None),  # cgroup v2, no limit
        ("536870912\n", 512 * MIB),
        ("9223372036854771712\n", None),  # cgroup v1, no limit (4 KiB pages)
        ("9223372036854710272\n", None),  # cgroup v1, no limit (64 KiB pages)
        ("0", None),
    ],
)
def test_parse_limit(raw: str, limit: int | None) -> None:
    assert parse_limit(raw) == limit


@pytest.mark.parametrize(
    ("rss", "limit", "near"),
    [(400 * MIB, 512 * MIB, False), (436 * MIB, 512 * MIB, True), (600 * MIB, None, False)],
)
def test_near_is_85_percent_of_the_limit(rss: int, limit: int | None, near: bool) -> None:
    assert MemoryReading(rss, limit).near() is near


def test_limit_files_follow_the_process_cgroup_then_the_mount_root(tmp_path: Path) -> None:
    v2 = limit_files(tmp_path, "0::/kubepods/pod1/ctr\n")
    assert v2[0] == tmp_path / "kubepods/pod1/ctr/memory.max"
    v1 = limit_files(tmp_path, "9:cpu,cpuacct:/x\n7:memory:/kubepods/pod1/ctr\n")
    assert v1[0] == tmp_path / "memory/kubepods/pod1/ctr/memory.limit_in_bytes"
    assert v1[-1] == tmp_path / "memory/memory.limit_in_bytes"


def test_a_container_on_cgroup_v1_reads_its_own_limit_at_the_mount_root(tmp_path: Path) -> None:
    """runc mounts the container's own memory cgroup at /sys/fs/cgroup/memory: the host path
    in /proc/self/cgroup does not exist inside it."""
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory/memory.limit_in_bytes").write_text(f"{256 * MIB}\n")
    files = limit_files(tmp_path, "7:memory:/kubepods/burstable/pod1/ctr\n")
    assert read_limit(files) == 256 * MIB
    assert read_limit([tmp_path / "nowhere"]) is None


class Posted(Events):
    def __init__(self) -> None:
        super().__init__(Kube.__new__(Kube))
        self.posted: list[tuple[str, str, str]] = []

    async def warn(self, ref: ObjectRef, reason: str, message: str) -> None:
        self.posted.append((ref.name, reason, message))


def gauge(name: str) -> float | None:
    return REGISTRY.get_sample_value(name)


def test_a_crossing_is_said_once_on_every_policy_and_again_after_it_eased(tmp_path: Path) -> None:
    limit = tmp_path / "memory.max"
    limit.write_text(f"{100 * MIB}\n")
    rss = [50 * MIB]
    policies = [("web", "u1")]
    events = Posted()
    guard = MemoryGuard(events, lambda: policy_refs(policies), files=[limit], rss=lambda: rss[0])

    def check(mib: int) -> list[str]:
        rss[0] = mib * MIB
        before = len(events.posted)
        asyncio.run(guard.check())
        return [name for name, _, _ in events.posted[before:]]

    assert check(50) == []
    assert (gauge("schedpolicy_memory_limit_bytes"), gauge("schedpolicy_memory_near_limit")) == (
        100 * MIB,
        0,
    )
    assert check(90) == ["web"]
    assert events.posted[0][1] == REASON
    assert "90% of the cgroup limit of 100 MiB" in events.posted[0][2]
    assert gauge("schedpolicy_memory_near_limit") == 1
    assert check(95) == []  # still near: nothing new
    # A policy the controller learns of while near (at start, before its watch listed them).
    policies.append(("gpus", "u2"))
    assert check(95) == ["gpus"]
    assert check(60) == []
    assert check(88) == ["web", "gpus"]  # crossed again


def test_no_limit_no_warning(tmp_path: Path) -> None:
    limit = tmp_path / "memory.max"
    limit.write_text("max\n")
    events = Posted()
    guard = MemoryGuard(events, lambda: policy_refs([("web", "u1")]), files=[limit], rss=lambda: 1)
    asyncio.run(guard.check())
    assert events.posted == []
    assert gauge("schedpolicy_memory_limit_bytes") == 0
