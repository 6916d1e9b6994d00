"""`python -m bench.admission.heap_profiled webhook ...`: `python -m schedpolicy` under
tracemalloc, for the memory lane's heap profile.

Takes schedpolicy's own arguments. Each SIGUSR2 writes a snapshot of the Python heap to
$SCHEDPOLICY_HEAP_DIR/<n>.snap and, beside it, <n>.json with what tracemalloc counted
(current and peak) and what the kernel counted (VmRSS, VmHWM), so that the bench can say
how much of the resident set the Python heap explains. Tracing costs memory and time of its
own: the lane's RSS figures come from an untraced process; this one only says where.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

from schedpolicy.app.cli import main as schedpolicy

MODULE = "bench.admission.heap_profiled"
HEAP_DIR = "SCHEDPOLICY_HEAP_DIR"
FRAMES = 16


def env(into: Path) -> dict[str, str]:
    """The environment of a process run as this module, its snapshots written into `into`."""
    return {HEAP_DIR: str(into)}


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (the peak) of a process, in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = round(int(value.split()[0]) / 1024, 1)
    return found


class MallInfo2(ctypes.Structure):
    """glibc's mallinfo2(3): what malloc holds outside Python's own arenas (OpenSSL's
    buffers, the C extensions' allocations), and how much of it is free but kept."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_mib() -> dict[str, float]:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    mib = 2**20
    return {
        "malloc_in_use_mib": round((info.uordblks + info.hblkhd) / mib, 1),
        "malloc_free_kept_mib": round(info.fordblks / mib, 1),
    }


def main() -> int:
    into = Path(os.environ[HEAP_DIR])
    into.mkdir(parents=True, exist_ok=True)
    taken = 0

    def snapshot(_sig: int, _frame: FrameType | None) -> None:
        nonlocal taken
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.take_snapshot().dump(str(into / f"{taken}.snap"))
        figures = {
            "traced_mib": round(current / 2**20, 1),
            "traced_peak_mib": round(peak / 2**20, 1),
            **memory_mib(os.getpid()),
            **malloc_mib(),
        }
        (into / f"{taken}.json").write_text(json.dumps(figures))
        taken += 1

    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR2, snapshot)
    return schedpolicy(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
