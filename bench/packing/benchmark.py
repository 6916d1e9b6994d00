"""B4, B4DRA and B4C as `python -m bench` runs them."""

from __future__ import annotations

from typing import Any

from bench.benchmark import Benchmark
from bench.packing import churn, dra, stream
from bench.packing.section import section_b4, section_b4_dra, section_b4c


def _b4_headline(r: dict[str, Any]) -> str:
    return (
        f"B4 free nodes {r['schedpolicy_profile']['free_nodes']} vs default"
        f" {r['default_profile']['free_nodes']} vs FFD {r['ffd_bound']['free_nodes']}:"
        f" ratio {r['ratio']}"
    )


def _b4_dra_headline(r: dict[str, Any]) -> str:
    shapes = "; ".join(
        f"{shape}: " + ", ".join(f"{name} {lane['free_nodes']}" for name, lane in lanes.items())
        for shape, lanes in r["shapes"].items()
    )
    return f"B4-DRA free nodes {shapes} vs FFD {r['ffd_bound']['free_nodes']}"


def _b4c_headline(r: dict[str, Any]) -> str:
    return "B4c min 8-GPU ratio " + ", ".join(
        f"{name} {lane['min_ratio_8gpu']} (mean {lane['mean_ratio_8gpu']})"
        for name, lane in r["lanes"].items()
    )


B4 = Benchmark("B4", "b4-packing", section_b4, _b4_headline, stream.run_b4)
B4DRA = Benchmark("B4DRA", "b4-dra-packing", section_b4_dra, _b4_dra_headline, dra.run_b4_dra)
B4C = Benchmark("B4C", "b4c-churn", section_b4c, _b4c_headline, churn.run_b4c)
