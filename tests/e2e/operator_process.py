"""Runs `python -m schedpolicy run` as a real process against the local cluster."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path


class OperatorProcess:
    def __init__(self, kubeconfig: Path, log: Path, *extra: str) -> None:
        self.log = log
        self.argv = [
            sys.executable,
            "-m",
            "schedpolicy",
            "run",
            f"--kubeconfig={kubeconfig}",
            *extra,
        ]
        self._out = log.open("ab")
        self._offset = log.stat().st_size
        self.proc = subprocess.Popen(self.argv, stdout=self._out, stderr=subprocess.STDOUT)

    def restart(self) -> None:
        """Stop (SIGTERM) and start again; later log checks only see the new process."""
        self.stop()
        self._out = self.log.open("ab")
        self._offset = self.log.stat().st_size
        self.proc = subprocess.Popen(self.argv, stdout=self._out, stderr=subprocess.STDOUT)

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
