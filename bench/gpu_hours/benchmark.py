"""B6 as `python -m bench` runs it: on clusters of its own."""

from __future__ import annotations

from bench.benchmark import Benchmark
from bench.gpu_hours.run import run_b6
from bench.gpu_hours.section import section_b6
from bench.replay.section import lanes_headline

B6 = Benchmark("B6", "b6-gpu-hours", section_b6, lanes_headline("B6"), run_b6, own_cluster=True)
