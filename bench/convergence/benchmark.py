"""B1 and B2 as `python -m bench` runs them: B1 measures B2 on the same fleet."""

from __future__ import annotations

from typing import Any

from bench.benchmark import Benchmark, Options, Result
from bench.convergence import run
from bench.convergence.section import section_b1, section_b2

B1_KEY, B2_KEY = "b1-convergence", "b2-memory"


def _b2_points(b2: Result, o: Options) -> dict[str, Result]:
    # One B2 point per scale as well: the report takes the slope between two of them.
    return {B2_KEY: b2, f"{B2_KEY}-{o.scale.name}": b2}


def _run_b1(o: Options) -> dict[str, Result]:
    b1, b2 = run.run_b1_b2(o.cluster, o.scale, o.out)
    return {B1_KEY: b1, **_b2_points(b2, o)}


def _run_b2(o: Options) -> dict[str, Result]:
    return _b2_points(run.run_b2(o.cluster, o.scale), o)


def _b1_headline(r: dict[str, Any]) -> str:
    return (
        f"B1 ratio vs watching {r['ratio_vs_watching']}, vs raw {r['ratio']} (controller"
        f" {r['operator_patches_per_second']}/s, watching {r['watching_patches_per_second']}/s,"
        f" raw {r['baseline_patches_per_second']}/s), redundant {r['redundant_writes']},"
        f" after restart {r['writes_after_restart']}, CPU"
        f" {r['cpu_seconds_per_1000_pod_events']} s per 1000 pod events"
    )


def _b2_headline(r: dict[str, Any]) -> str:
    return (
        f"B2 controller {r['operator_peak_rss_mib']} MiB, webhook"
        f" {r['webhook_peak_rss_mib']} MiB, floor {r['floor_mib']} MiB"
    )


B1 = Benchmark("B1", B1_KEY, section_b1, _b1_headline, run_with=_run_b1, covers=("B2",))
B2 = Benchmark("B2", B2_KEY, section_b2, _b2_headline, run_with=_run_b2)
