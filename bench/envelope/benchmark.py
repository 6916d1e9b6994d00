"""B8 as `python -m bench` runs it: not in the default set (about 80 minutes)."""

from __future__ import annotations

from typing import Any

from bench.benchmark import Benchmark
from bench.envelope.run import run_b8
from bench.envelope.section import section_b8


def _headline(r: dict[str, Any]) -> str:
    last = r["steps"][-1]
    phases = r["churn"].get("phases") or [r["churn"]]
    lags = [p["watch"]["lag_new_pods"]["p99"] for p in phases]
    return (
        f"B8 {last['pods']} pods: controller peak {last['controller']['peak_mib']} MiB,"
        f" churn lag p99 {lags} s, wrong after {r['churn']['wrong_after']}"
    )


B8 = Benchmark("B8", "b8-envelope", section_b8, _headline, run_b8, in_default_set=False)
