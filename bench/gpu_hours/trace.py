"""A window of the Alibaba GPU trace (cluster-trace-gpu-v2023, the ATC '23 fragmentation
paper's), as tasks a replay can run. Pure, apart from reading the file.

Kubernetes has no fractional `nvidia.com/gpu`, so a task that asks for part of a GPU
(`gpu_milli` < 1000) gets one whole GPU here. Tasks without a GPU are left out: B6 measures
GPU nodes. A task still running when the window ends is stopped there.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.datasets import MissingSource, require_source, shared_data

TRACE_ENV = "SCHEDPOLICY_ALIBABA_TRACE"


class TraceError(ValueError):
    pass


@dataclass(frozen=True)
class Task:
    name: str
    gpus: int  # whole GPUs, fractions rounded up
    cpu_milli: int
    memory_mib: int
    start: float  # seconds after the window opens, compressed
    end: float
    rounded_up: bool  # asked for a fraction of a GPU

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * (self.end - self.start)


@dataclass(frozen=True)
class Window:
    first: int  # trace seconds
    length: int  # trace seconds
    compression: float  # trace seconds per replay second
    tasks: tuple[Task, ...]

    @property
    def replay_seconds(self) -> float:
        return self.length / self.compression

    def summary(self) -> dict[str, object]:
        by_gpus = Counter(t.gpus for t in self.tasks)
        return {
            "trace_start_s": self.first,
            "trace_hours": round(self.length / 3600, 2),
            "compression": self.compression,
            "replay_seconds": round(self.replay_seconds),
            "tasks": len(self.tasks),
            "tasks_by_gpus": {str(k): by_gpus[k] for k in sorted(by_gpus)},
            "fractional_rounded_up": sum(t.rounded_up for t in self.tasks),
            "gpu_seconds_needed": round(sum(t.gpu_seconds for t in self.tasks)),
        }


def trace_path() -> Path:
    return shared_data("alibaba-gpu-v2023/openb_pod_list_default.csv", TRACE_ENV)


def _int(row: dict[str, str], key: str, line: int) -> int:
    try:
        return int(row[key])
    except (KeyError, ValueError) as err:
        raise TraceError(f"line {line}: {key}={row.get(key)!r} is not an integer") from err


def window(rows: Iterable[dict[str, str]], first: int, length: int, compression: float) -> Window:
    """The GPU tasks created in [first, first + length), times relative to `first` and
    divided by `compression`."""
    tasks: list[Task] = []
    for line, row in enumerate(rows, start=2):
        gpus = _int(row, "num_gpu", line)
        created = _int(row, "creation_time", line)
        if gpus <= 0 or not first <= created < first + length:
            continue
        deleted = min(_int(row, "deletion_time", line), first + length)
        milli = _int(row, "gpu_milli", line)
        tasks.append(
            Task(
                name=row["name"],
                gpus=max(1, gpus),
                cpu_milli=_int(row, "cpu_milli", line),
                memory_mib=_int(row, "memory_mib", line),
                start=(created - first) / compression,
                end=(max(created + 1, deleted) - first) / compression,
                rounded_up=0 < milli < 1000,
            )
        )
    if not tasks:
        raise TraceError(f"no GPU task was created in [{first}, {first + length})")
    return Window(first, length, compression, tuple(sorted(tasks, key=lambda t: t.start)))


def load(first: int, length: int, compression: float, path: Path | None = None) -> Window:
    source = path or trace_path()
    if not source.exists():
        raise TraceError(
            f"{source} is missing; point {TRACE_ENV} at openb_pod_list_default.csv of"
            " github.com/alibaba/clusterdata cluster-trace-gpu-v2023"
        )
    try:
        require_source(source)
    except MissingSource as err:
        raise TraceError(str(err)) from None
    with source.open(newline="") as f:
        return window(csv.DictReader(f), first, length, compression)


def packed_lower_bound(tasks: Sequence[Task], gpus_per_node: int) -> float:
    """Node-seconds if every GPU-second the tasks need were packed onto `gpus_per_node`-GPU
    nodes with nothing left idle: the offline bound no placement can beat."""
    return sum(t.gpu_seconds for t in tasks) / gpus_per_node


def peak_gpus(tasks: Sequence[Task]) -> int:
    events = sorted([(t.start, t.gpus) for t in tasks] + [(t.end, -t.gpus) for t in tasks])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
