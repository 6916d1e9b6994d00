"""Starts long-lived processes detached from the caller and stops them again.

Each process runs in its own session so it outlives `python -m localcluster up`,
writes to its own log (kept for failed runs), and is recorded in a pid file that
also names the executable, so a recycled pid is never killed by mistake.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    argv: tuple[str, ...]
    log: Path

    def alive(self) -> bool:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
        # cmdline reads empty for an instant while a process starts; a recycled pid
        # belonging to some other program shows that program's name instead.
        exe = cmdline.split(b"\0", 1)[0].decode(errors="replace")
        return exe in ("", self.argv[0])


class Supervisor:
    def __init__(self, workdir: Path) -> None:
        self.pids = workdir / "pids"
        self.logs = workdir / "logs"
        self.pids.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        # Children started by this very process, so that their exit status can be read.
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ProcessRecord:
        log = self.logs / f"{name}.log"
        with log.open("ab") as out:
            out.write(f"\n=== {time.strftime('%H:%M:%S')} start: {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        self._children[name] = proc
        record = ProcessRecord(name=name, pid=proc.pid, argv=tuple(argv), log=log)
        (self.pids / f"{name}.json").write_text(
            json.dumps({"pid": proc.pid, "argv": argv, "log": str(log)})
        )
        return record

    def get(self, name: str) -> ProcessRecord | None:
        path = self.pids / f"{name}.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return ProcessRecord(
            name=name, pid=data["pid"], argv=tuple(data["argv"]), log=Path(data["log"])
        )

    def exit_status(self, name: str) -> int | None:
        """The exit status of a child this process started, or None if unknown or running."""
        proc = self._children.get(name)
        return None if proc is None else proc.poll()

    def records(self) -> list[ProcessRecord]:
        found = (self.get(p.stem) for p in sorted(self.pids.glob("*.json")))
        return [r for r in found if r is not None]

    def stop(self, name: str, *, grace: float = 10.0, sig: int = signal.SIGTERM) -> None:
        """Signal the process group, wait up to `grace` seconds, then SIGKILL it."""
        record = self.get(name)
        if record is None:
            return
        if record.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(record.pid, sig)
            deadline = time.monotonic() + grace
            while record.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            if record.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(record.pid, signal.SIGKILL)
                while record.alive():
                    time.sleep(0.05)
        (self.pids / f"{name}.json").unlink(missing_ok=True)
        proc = self._children.pop(name, None)
        if proc is not None:
            proc.wait()

    def stop_all(self, order: list[str]) -> None:
        names = [r.name for r in self.records()]
        for name in [n for n in order if n in names] + [n for n in names if n not in order]:
            self.stop(name)
