"""`python -m bench.convergence.profiled run|webhook ...`: `python -m schedpolicy` under
pyinstrument.

Takes schedpolicy's own arguments and, when the process ends (on SIGTERM too: both
commands stop on it and return), writes the profile as text to $SCHEDPOLICY_PROFILE,
every frame with SCHEDPOLICY_PROFILE_ALL=1. The benchmarks profile a process in place
this way, in a run of its own: profiling slows it (pyinstrument comes with the bench
extra).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from schedpolicy.app.cli import main as schedpolicy

MODULE = "bench.convergence.profiled"
PROFILE = "SCHEDPOLICY_PROFILE"


def env(to: Path) -> dict[str, str]:
    """The environment of a process run as `python -m bench.convergence.profiled`, profiled
    into `to`."""
    return {PROFILE: str(to)}


def main() -> int:
    # Only here: the bench's own processes import this module for MODULE and env.
    from pyinstrument import Profiler

    to = Path(os.environ[PROFILE])
    profiler = Profiler(interval=0.001)
    profiler.start()
    try:
        return schedpolicy(sys.argv[1:])
    finally:
        profiler.stop()
        to.write_text(
            profiler.output_text(
                unicode=False,
                color=False,
                show_all=os.environ.get("SCHEDPOLICY_PROFILE_ALL") == "1",
            )
        )


if __name__ == "__main__":
    sys.exit(main())
