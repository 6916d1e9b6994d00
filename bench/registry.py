"""Every benchmark, in the order `python -m bench` runs them and REPORT.md shows them. A new
benchmark is its package's `benchmark.py` and one line here."""

from __future__ import annotations

from bench.admission.benchmark import B3, B3M, B3P
from bench.benchmark import Benchmark
from bench.convergence.benchmark import B1, B2
from bench.envelope.benchmark import B8
from bench.gpu_hours.benchmark import B6
from bench.packing.benchmark import B4, B4C, B4DRA
from bench.scaledown.benchmark import B5, B5G
from bench.serving.benchmark import B7, B7E

BENCHMARKS: tuple[Benchmark, ...] = (
    B1,
    B2,
    B3,
    B3M,
    B3P,
    B4,
    B4DRA,
    B4C,
    B5,
    B5G,
    B6,
    B7,
    B7E,
    B8,
)
BY_TAG = {b.tag: b for b in BENCHMARKS}
BY_KEY = {b.key: b for b in BENCHMARKS}
# A benchmark's result on another day of its trace: `<key>-day<N>`, shown after the key's own.
DAY = "-day"


def of_result(name: str) -> Benchmark | None:
    """The benchmark a bench/results/<name>.json belongs to; None for a side result, such as
    B2's point at one scale."""
    return BY_KEY.get(name.split(DAY)[0])
