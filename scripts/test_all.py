"""`make test`: every stage CI runs, on a plan that overlaps what can overlap, and a table of
each stage's time at the end.

On 2 cores the Go builds and the tests compete for the same CPU, so the plan is about what
waits: the Karpenter tests spend most of their time in timed windows (the coexistence soak,
consolidateAfter, B7's day), so they run beside the rest of the e2e suite on a cluster of
their own; the Go groups that only later stages need (the real node, Prometheus, the 1.35
lane) build at a lower priority while the e2e suite runs; and lint and the unit tests need
no Go at all, so they run while the control plane builds.

A stage starts once the stages it needs have passed; a failed stage skips the ones that
need it, the others still run, and the exit code is non-zero. Each stage's output goes to
.cluster/test-logs/<stage>.log and, line by line with its name, to stdout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = str(REPO / ".venv" / "bin" / "python")
BUILD = ["bash", "tools/build.sh"]
# Builds a later stage needs run below the tests' priority: a timed e2e test must not wait
# for a compiler.
LOW = ["nice", "-n", "15"]
# The suites that run on clusters of their own, beside the main e2e session.
KARPENTER_TESTS = ["tests/e2e/karpenter"]


@dataclass
class Stage:
    name: str
    argv: list[str]
    needs: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    started: float | None = None
    ended: float | None = None
    result: str = "waiting"  # waiting, running, passed, failed, skipped


def pytest(*args: str) -> list[str]:
    # The slowest tests, named at the end of each suite: where the next minutes are.
    return [PY, "-m", "pytest", "--durations=8", *args]


MONITORING = ("build node, monitoring",)


def plan() -> list[Stage]:
    e2e_main = ["tests/e2e", *(f"--ignore={p}" for p in KARPENTER_TESTS)]
    return [
        # Once, before the stages that use it: two makes would both rebuild a stale venv.
        Stage("venv", ["make", "--no-print-directory", "venv"]),
        Stage("build control plane", [*BUILD, "control-plane", "helm"]),
        Stage("lint python", ["make", "--no-print-directory", "lint-python"], ("venv",)),
        Stage("unit", ["make", "--no-print-directory", "unit"], ("venv",)),
        Stage("build karpenter", [*BUILD, "karpenter"], ("build control plane",)),
        Stage(
            "e2e",
            pytest(*e2e_main),
            ("build control plane", "unit"),
        ),
        Stage(
            "e2e karpenter",
            pytest(*KARPENTER_TESTS),
            ("build karpenter", "unit"),
        ),
        Stage("build node, monitoring", [*LOW, *BUILD, "node", "monitoring"], ("build karpenter",)),
        Stage("build 1.35", [*LOW, *BUILD, "compat"], MONITORING),
        Stage(
            "lint chart",
            ["make", "--no-print-directory", "lint-chart"],
            ("build node, monitoring",),
        ),
        Stage("image", [*LOW, "bash", "tools/image.sh"], MONITORING),
        Stage(
            "compat",
            pytest("tests/e2e", "-m", "compat"),
            ("build 1.35", "e2e"),
            {"SCHEDPOLICY_KUBERNETES": "1.35"},
        ),
        Stage("incluster", pytest("tests/incluster"), ("image", "compat", "e2e karpenter")),
    ]


class Runner:
    def __init__(self, stages: Sequence[Stage], logs: Path) -> None:
        self.stages = {s.name: s for s in stages}
        self.logs = logs
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.t0 = time.monotonic()

    def run(self) -> bool:
        self.logs.mkdir(parents=True, exist_ok=True)
        with self.lock:
            while any(s.result in ("waiting", "running") for s in self.stages.values()):
                for stage in self.stages.values():
                    if stage.result == "waiting":
                        self._consider(stage)
                self.changed.wait(timeout=5)
        return all(s.result == "passed" for s in self.stages.values())

    def _consider(self, stage: Stage) -> None:
        needs = [self.stages[n].result for n in stage.needs]
        if any(r in ("failed", "skipped") for r in needs):
            stage.result = "skipped"
            self._say(stage.name, f"skipped: needs {', '.join(stage.needs)}")
            self.changed.notify_all()
        elif all(r == "passed" for r in needs):
            stage.result, stage.started = "running", time.monotonic()
            threading.Thread(target=self._execute, args=(stage,), daemon=True).start()

    def _execute(self, stage: Stage) -> None:
        self._say(stage.name, "started: " + " ".join(stage.argv))
        log = self._log(stage)
        env = {**os.environ, **stage.env}
        with log.open("w") as out:
            proc = subprocess.Popen(
                stage.argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode(errors="replace")
                out.write(line)
                out.flush()
                self._say(stage.name, line.rstrip("\n"))
            code = proc.wait()
        with self.lock:
            stage.ended = time.monotonic()
            # pytest's 5 is "no tests collected": for a suite that should have some, a failure.
            stage.result = "passed" if code == 0 else "failed"
            self._say(stage.name, f"{stage.result} (exit {code})")
            self.changed.notify_all()

    def _say(self, name: str, text: str) -> None:
        sys.stdout.write(f"[{name}] {text}\n")
        sys.stdout.flush()

    def table(self) -> str:
        rows = [("stage", "start", "time", "result")]
        for s in self.stages.values():
            start = f"{(s.started - self.t0) / 60:5.1f} min" if s.started else "-"
            took = f"{(s.ended - s.started) / 60:5.1f} min" if s.started and s.ended else "-"
            rows.append((s.name, start, took, s.result))
        rows.append(("total", "", f"{(time.monotonic() - self.t0) / 60:5.1f} min", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        return "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows
        )

    def failures(self) -> str:
        """What failed, again at the very end: CI keeps only the tail of the output, and a
        failed stage's lines may have scrolled far above the table."""
        parts = []
        for s in self.stages.values():
            if s.result != "failed":
                continue
            lines = self._log(s).read_text(errors="replace").splitlines()
            picked = [ln for ln in lines if ln.startswith(("FAILED ", "ERROR ", "E   "))]
            parts.append(f"{s.name} failed; from {self._log(s)}:")
            parts.extend("  " + ln[:400] for ln in (picked[-25:] or lines[-25:]))
        return "\n".join(parts)

    def _log(self, stage: Stage) -> Path:
        return self.logs / (stage.name.replace(" ", "-").replace(",", "") + ".log")


def main() -> int:
    runner = Runner(plan(), REPO / ".cluster" / "test-logs")
    ok = runner.run()
    print("\nmake test, stage by stage:\n" + runner.table(), flush=True)
    failures = runner.failures()
    if failures:
        print("\n" + failures, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
