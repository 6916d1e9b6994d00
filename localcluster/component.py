"""What every part of the local cluster offers, and the waits they share.

A component is one process, or a few that only work together, behind the same small
interface: `start` launches it, `ready` waits until it serves (or raises, naming what went
wrong and where its log is), `stop` ends it. `launch` does the first two within the
component's own start-up budget. `LocalCluster` only composes components: it knows their
order, not their command lines.
"""

from __future__ import annotations

import contextlib
import ssl
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from localcluster.supervisor import Supervisor


class ClusterError(RuntimeError):
    pass


class NodeError(RuntimeError):
    pass


class Component(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def startup_timeout(self) -> float:
        """Seconds `launch` gives `ready`."""
        ...

    def start(self) -> None: ...

    def ready(self, timeout: float) -> None: ...

    def stop(self) -> None: ...


class Kubectl(Protocol):
    """Whatever runs kubectl as the cluster's admin: a LocalCluster, or its Clients."""

    def kubectl(
        self,
        *args: str,
        input: str | None = ...,
        objects: Iterable[Mapping[str, Any]] | None = ...,
        check: bool = ...,
        timeout: float = ...,
    ) -> str: ...


def launch(component: Component) -> None:
    component.start()
    component.ready(component.startup_timeout)


class Process(ABC):
    """A component that is one supervised process, ready once its health URL answers 200."""

    name: str
    startup_timeout: float

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor

    @abstractmethod
    def argv(self) -> list[str]: ...

    @abstractmethod
    def health_url(self) -> str: ...

    def health_context(self) -> ssl.SSLContext | None:
        return None

    def env(self) -> dict[str, str] | None:
        return None

    def start(self) -> None:
        self.supervisor.start(self.name, self.argv(), env=self.env())

    def ready(self, timeout: float) -> None:
        wait_http(self.supervisor, self.health_url(), self.health_context(), self.name, timeout)

    def stop(self) -> None:
        self.supervisor.stop(self.name)


def http_ok(url: str, ctx: ssl.SSLContext | None, timeout: float = 3) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_http(
    supervisor: Supervisor, url: str, ctx: ssl.SSLContext | None, name: str, timeout: float
) -> None:
    """Until `url` answers 200; a process `name` that exits meanwhile fails at once, with the
    end of its log."""
    deadline = time.monotonic() + timeout
    record = supervisor.get(name)
    while time.monotonic() < deadline:
        if http_ok(url, ctx):
            return
        if record is not None and not record.alive():
            tail = "\n".join(record.log.read_text(errors="replace").splitlines()[-25:])
            status = supervisor.exit_status(name)
            raise ClusterError(
                f"{name} exited (status {status}) during start-up;"
                f" last lines of {record.log}:\n{tail}"
            )
        time.sleep(0.25)
    raise ClusterError(
        f"{name} was not healthy at {url} within {timeout}s; see {supervisor.logs}/{name}.log"
    )


def wait_until(
    supervisor: Supervisor, name: str, ready: Callable[[], bool], what: str, timeout: float
) -> None:
    """Until `ready()` holds (an exception counts as not yet), while process `name` lives."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = supervisor.get(name)
        if record is None or not record.alive():
            raise NodeError(f"{name} exited; see {supervisor.logs / name}.log")
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.5)
    raise NodeError(f"timed out after {timeout}s waiting for {what}; see {supervisor.logs}")


def insecure() -> ssl.SSLContext:
    # The components serve self-signed certs on their health ports; only liveness is read.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def has_ready_condition(obj: Mapping[str, Any]) -> bool:
    conditions = obj.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
