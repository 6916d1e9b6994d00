"""Says so before the kernel does: reads the process's resident memory and its cgroup's limit
every few seconds, exports both, and warns on every policy once each time the process
crosses into its near-limit share (core/memory_pressure.py decides)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from schedpolicy.core import api
from schedpolicy.core.memory_pressure import NEAR, MemoryReading, crossed_into, parse_limit
from schedpolicy.shell import metrics
from schedpolicy.shell.events import Events
from schedpolicy.shell.kube import ObjectRef

log = logging.getLogger("schedpolicy.memory")
CGROUP = Path("/sys/fs/cgroup")
REASON = "MemoryNearLimit"


def limit_files(root: Path = CGROUP, self_cgroup: str | None = None) -> list[Path]:
    """Where this process's memory limit may be, most specific first: cgroup v2's
    memory.max and v1's memory.limit_in_bytes, under the process's own cgroup path (a
    host without cgroup namespaces) and at the mount's root (a container's own view)."""
    if self_cgroup is None:
        try:
            self_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            self_cgroup = ""
    found: list[Path] = []
    for line in self_cgroup.splitlines():
        hierarchy, controllers, path = [*line.split(":", 2), "", ""][:3]
        rel = path.lstrip("/")
        if hierarchy == "0" and controllers == "":
            found.append(root / rel / "memory.max")
        elif "memory" in controllers.split(","):
            found.append(root / "memory" / rel / "memory.limit_in_bytes")
    found += [root / "memory.max", root / "memory" / "memory.limit_in_bytes"]
    return list(dict.fromkeys(found))


def read_limit(files: Iterable[Path]) -> int | None:
    """The first limit file that reads; None when none does, or it says there is no limit."""
    for path in files:
        try:
            return parse_limit(path.read_text())
        except (OSError, ValueError):
            continue
    return None


def read_rss(statm: Path = Path("/proc/self/statm")) -> int:
    return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class MemoryGuard:
    def __init__(
        self,
        events: Events,
        policies: Callable[[], Iterable[ObjectRef]],
        interval: float = 10.0,
        threshold: float = NEAR,
        files: list[Path] | None = None,
        rss: Callable[[], int] = read_rss,
    ) -> None:
        self.events = events
        self.policies = policies
        self.interval = interval
        self.threshold = threshold
        self.files = limit_files() if files is None else files
        self.rss = rss
        self.near = False
        self.warned: set[str] = set()  # policy UIDs told during the current crossing

    def read(self) -> MemoryReading:
        return MemoryReading(self.rss(), read_limit(self.files))

    async def check(self) -> MemoryReading:
        reading = self.read()
        now = reading.near(self.threshold)
        metrics.set_memory(reading.limit, now)
        if crossed_into(self.near, now):
            log.warning("%s", self._message(reading))
        self.near = now
        if not now:
            self.warned.clear()
            return reading
        # Once per policy per crossing: a policy seen only after the crossing (the watch
        # may not have listed them yet when the process starts near its limit) is told too.
        for ref in self.policies():
            if ref.uid not in self.warned:
                await self.events.warn(ref, REASON, self._message(reading))
                self.warned.add(ref.uid)
        return reading

    def _message(self, reading: MemoryReading) -> str:
        return f"{os.environ.get('POD_NAME', 'the controller')}: {reading.describe()}"

    async def run(self) -> None:
        while True:
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a guard that crashes would guard nothing
                log.warning("could not read memory use: %s", err)
            await asyncio.sleep(self.interval)


def policy_refs(objects: Iterable[tuple[str, str]]) -> list[ObjectRef]:
    return [ObjectRef(api.API_VERSION, api.KIND, name, uid) for name, uid in objects]
