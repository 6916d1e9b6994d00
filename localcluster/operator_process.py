"""Runs `python -m schedpolicy run` (or `webhook`) as a real process against the local
cluster (for the e2e tests, the benchmarks and the demo)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from localcluster.controlplane import LocalCluster, free_port


class OperatorProcess:
    def __init__(
        self,
        kubeconfig: Path,
        log: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        command: str = "run",
    ) -> None:
        self.log = log
        self.argv = [
            sys.executable,
            "-m",
            "schedpolicy",
            command,
            f"--kubeconfig={kubeconfig}",
            *extra,
        ]
        self.env = {**os.environ, **(env or {})}
        self._out = log.open("ab")
        self._offset = log.stat().st_size
        self.proc = subprocess.Popen(
            self.argv, stdout=self._out, stderr=subprocess.STDOUT, env=self.env
        )

    def restart(self) -> None:
        """Stop (SIGTERM) and start again; later log checks only see the new process."""
        self.stop()
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


@contextlib.contextmanager
def running(cluster: LocalCluster, *extra: str) -> Iterator[OperatorProcess]:
    """The operator as the chart's ServiceAccount, /metrics on a free loopback port,
    synced before it is handed out and stopped afterwards, whatever happened."""
    proc = OperatorProcess(
        cluster.operator_kubeconfig,
        cluster.workdir / "logs" / "schedpolicy-operator.log",
        f"--metrics-port={free_port()}",
        "--metrics-address=127.0.0.1",
        *extra,
    )
    try:
        proc.wait_for_log("view synced")
        yield proc
    finally:
        proc.stop()
