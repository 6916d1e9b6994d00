"""Runs `python -m schedpolicy run` (or `webhook`) as a real process against the local
cluster (for the e2e tests, the benchmarks and the demo).

Every command line of the operator here is built by `schedpolicy_argv`: by
`controller_argv` for the controller as the chart's ServiceAccount, and by
`localcluster.webhook.LoopbackWebhook.argv` for the webhook.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families

from localcluster.ports import free_port

SCHEDPOLICY = "schedpolicy"


class Cluster(Protocol):
    """What the processes and the webhook registration use of a LocalCluster (whose module
    imports this one, so this one takes it by its shape)."""

    workdir: Path
    operator_kubeconfig: Path
    webhook_kubeconfig: Path

    def kubectl(self, *args: str, objects: Iterable[Mapping[str, Any]] | None = ...) -> str: ...


def schedpolicy_argv(
    command: str, kubeconfig: Path, *extra: str, module: str = SCHEDPOLICY
) -> list[str]:
    """`python -m schedpolicy COMMAND --kubeconfig=... EXTRA...`; `module` may name a
    wrapper that takes the same arguments (the bench's profiler, bench.convergence.profiled)."""
    return [sys.executable, "-m", module, command, f"--kubeconfig={kubeconfig}", *extra]


def metrics_flags(on: bool = True) -> list[str]:
    """/metrics on a free loopback port, or off. Plain HTTP: only this machine reaches it,
    and the tests read it often; the authenticated HTTPS endpoint has its own e2e test."""
    if not on:
        return ["--metrics-port=0"]
    return [f"--metrics-port={free_port()}", "--metrics-address=127.0.0.1", "--metrics-insecure"]


def controller_argv(
    cluster: Cluster, *extra: str, metrics: bool = True, module: str = SCHEDPOLICY
) -> list[str]:
    """`schedpolicy run` as the chart's ServiceAccount, /metrics on a free loopback port
    (unless not `metrics`)."""
    return schedpolicy_argv(
        "run", cluster.operator_kubeconfig, *metrics_flags(metrics), *extra, module=module
    )


class OperatorProcess:
    def __init__(
        self,
        kubeconfig: Path,
        log: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        command: str = "run",
    ) -> None:
        self._launch(schedpolicy_argv(command, kubeconfig, *extra), log, env)

    @classmethod
    def of(
        cls, argv: Sequence[str], log: Path, env: dict[str, str] | None = None
    ) -> OperatorProcess:
        """A process with this command line (from `controller_argv` or a webhook's `argv`)."""
        proc = cls.__new__(cls)
        proc._launch(list(argv), log, env)
        return proc

    def _launch(self, argv: list[str], log: Path, env: dict[str, str] | None) -> None:
        self.log = log
        self.argv = argv
        self.env = {**os.environ, **(env or {})}
        self._spawn()

    def restart(self) -> None:
        """Stop (SIGTERM) and start again; later log checks only see the new process."""
        self.stop()
        self._spawn()

    def _spawn(self) -> None:
        self._out = self.log.open("ab")
        self._offset = self.log.stat().st_size
        self.proc = subprocess.Popen(
            self.argv, stdout=self._out, stderr=subprocess.STDOUT, env=self.env
        )

    def peak_rss_mib(self) -> float:
        """Peak resident memory so far (VmHWM), in MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM in /proc status")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def output(self) -> str:
        with self.log.open("rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    @property
    def metrics_port(self) -> int | None:
        for arg in self.argv:
            if arg.startswith("--metrics-port="):
                return int(arg.partition("=")[2]) or None
        return None

    def scrape(self) -> str:
        """The process's own /metrics page (it must run with --metrics-port=N)."""
        if self.metrics_port is None:
            raise RuntimeError("the operator was started without a metrics port")
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    def metric(self, name: str, **labels: str) -> float | None:
        """One sample's value from /metrics, or None when it is not exported."""
        for family in text_string_to_metric_families(self.scrape()):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return None

    def wait_for_log(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"operator never logged {text!r}; output:\n{self.output()[-3000:]}")

    def stop(self, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode


def controller(
    cluster: Cluster,
    *extra: str,
    metrics: bool = True,
    module: str = SCHEDPOLICY,
    env: dict[str, str] | None = None,
) -> OperatorProcess:
    """The operator as the chart's ServiceAccount (see `controller_argv`), logging to the
    cluster's logs/schedpolicy-operator.log."""
    return OperatorProcess.of(
        controller_argv(cluster, *extra, metrics=metrics, module=module),
        cluster.workdir / "logs" / "schedpolicy-operator.log",
        env,
    )


@contextlib.contextmanager
def running(cluster: Cluster, *extra: str) -> Iterator[OperatorProcess]:
    """The operator as the chart's ServiceAccount, /metrics on a free loopback port,
    synced before it is handed out and stopped afterwards, whatever happened."""
    proc = controller(cluster, *extra)
    try:
        proc.wait_for_log("view synced")
        yield proc
    finally:
        proc.stop()
