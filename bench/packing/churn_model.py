"""B4c's arithmetic, free of the cluster: the seeded job stream, the offline repack it is
judged against, and what one checkpoint reports."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SIZES, WEIGHTS = (1, 2, 4, 8), (0.4, 0.3, 0.2, 0.1)
CPU_PER_GPU = (4, 8, 12)  # cores; never more than a node's 12 per GPU, so GPUs always bind


@dataclass(frozen=True)
class Job:
    index: int
    gpus: int
    cpu: int  # whole cores
    lifetime: int  # seconds from Running to Succeeded


def job_stream(seed: int, count: int, mean_lifetime: int) -> list[Job]:
    """Sizes 1/2/4/8 GPUs; lifetimes uniform over [mean/2, 3·mean/2]. The same seed gives
    every profile the same jobs in the same order."""
    rng = random.Random(seed)
    low, high = mean_lifetime // 2, mean_lifetime * 3 // 2
    jobs = []
    for index in range(count):
        gpus = rng.choices(SIZES, WEIGHTS)[0]
        jobs.append(Job(index, gpus, gpus * rng.choice(CPU_PER_GPU), rng.randint(low, high)))
    return jobs


@dataclass(frozen=True)
class Repack:
    free: tuple[int, ...]  # per node, in the order the capacities were given
    unplaced: int


def first_fit_decreasing(jobs: Sequence[int], capacities: Sequence[int]) -> Repack:
    """Largest job first, each into the first node it fits, trying the smallest nodes first so
    that small jobs fill 4-GPU nodes before they break into an 8-GPU one."""
    order = sorted(range(len(capacities)), key=lambda i: (capacities[i], i))
    free = list(capacities)
    unplaced = 0
    for size in sorted(jobs, reverse=True):
        for i in order:
            if free[i] >= size:
                free[i] -= size
                break
        else:
            unplaced += 1
    return Repack(tuple(free), unplaced)


def placeable(free: Sequence[int], size: int) -> int:
    """How many more jobs of `size` GPUs fit, each wholly on one node."""
    return sum(f // size for f in free)


def ratio(actual: int, ideal: int) -> float | None:
    return round(actual / ideal, 3) if ideal else None


def checkpoint(
    capacities: Mapping[str, int],
    running: Mapping[str, Sequence[int]],
    pending: Sequence[int],
) -> dict[str, Any]:
    """One moment of one profile's run.

    `running` is the GPU sizes of the jobs bound to each node; `pending` those the scheduler
    found no node for. The placeable counts compare the cluster's free GPUs with a repack of
    the running jobs; the pending counts compare the pods left waiting with a repack of the
    running and the pending jobs together.
    """
    names = sorted(capacities)
    caps = [capacities[n] for n in names]
    free = [capacities[n] - sum(running.get(n, ())) for n in names]
    placed = [size for n in names for size in running.get(n, ())]
    ideal = first_fit_decreasing(placed, caps)
    ideal_pending = first_fit_decreasing([*placed, *pending], caps).unplaced
    actual8, actual4 = placeable(free, 8), placeable(free, 4)
    ideal8, ideal4 = placeable(ideal.free, 8), placeable(ideal.free, 4)
    return {
        "running_jobs": len(placed),
        "running_gpus": sum(placed),
        "pending_jobs": len(pending),
        "pending_gpus": sum(pending),
        "load": round(sum(placed) / sum(caps), 3),
        "placeable_8gpu": actual8,
        "placeable_4gpu": actual4,
        "ffd_placeable_8gpu": ideal8,
        "ffd_placeable_4gpu": ideal4,
        "ffd_pending_jobs": ideal_pending,
        "ratio_8gpu": ratio(actual8, ideal8),
        "ratio_4gpu": ratio(actual4, ideal4),
    }
