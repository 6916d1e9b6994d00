"""Runs `python -m schedpolicy run` as a real process against the local cluster
(for the e2e tests, the benchmarks and the demo)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class OperatorProcess:
    def __init__(
        self, kubeconfig: Path, log: Path, *extra: str, env: dict[str, str] | None = None
    ) -> None:
        self.log = log
        self.argv = [
            sys.executable,
            "-m",
            "schedpolicy",
            "run",
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
