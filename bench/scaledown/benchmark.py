"""B5 and B5G as `python -m bench` runs them."""

from __future__ import annotations

from typing import Any

from bench.benchmark import Benchmark
from bench.scaledown import gpu, run
from bench.scaledown.section import section_b5, section_b5g


def _b5_headline(r: dict[str, Any]) -> str:
    emptied = r["nodes_emptied"]
    return (
        f"B5 nodes emptied {emptied['with_policy']} vs none {emptied['without_policy']}"
        f" vs ideal {emptied['ideal']}: ratio {r['ratio']}"
    )


def _b5g_headline(r: dict[str, Any]) -> str:
    f = r["freed"]
    return (
        f"B5g GPU nodes freed: none {f['no_policy']}, CPU fill {f['cpu_fill']}, GPU fill"
        f" {f['gpu_fill']}, ideal {f['ideal']}"
    )


B5 = Benchmark("B5", "b5-scaledown", section_b5, _b5_headline, run.run_b5)
B5G = Benchmark("B5G", "b5g-gpu-scaledown", section_b5g, _b5g_headline, gpu.run_b5g)
