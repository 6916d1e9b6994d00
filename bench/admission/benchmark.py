"""B3, B3M and B3P as `python -m bench` runs them."""

from __future__ import annotations

from typing import Any

from bench.admission.run import run_b3, run_b3_cost, run_b3_memory
from bench.admission.section import section_b3, section_b3_cost, section_b3_memory
from bench.benchmark import Benchmark


def _b3_headline(r: dict[str, Any]) -> str:
    b = r.get("burst") or {}
    return (
        f"B3 own p99 {r['own_p99_ms']} ms, apiserver p99 {r['webhook_p99_ms']} ms, added create"
        f" p99 {r['added_p99_ms']} ms; burst {b.get('share_under_25ms')} under 25 ms,"
        f" fail-opens {b.get('fail_opens')}, unhinted {b.get('pods_without_hints')};"
        f" compiled {r.get('compiled_gain')}"
    )


def _b3m_headline(r: dict[str, Any]) -> str:
    return f"B3m webhook RSS {r['webhook_memory']['grew_mib']} MiB over idle after the bursts"


def _b3p_headline(r: dict[str, Any]) -> str:
    c = r["policy_cost"]
    return (
        f"B3p compiled {c['compiled_over_floor']} x the floor, output"
        f" {c['output_over_floor']} x, compiled {c['compiled_over_output']} x the output"
    )


B3 = Benchmark("B3", "b3-webhook", section_b3, _b3_headline, run_b3)
B3M = Benchmark(
    "B3M", "b3m-webhook-memory", section_b3_memory, _b3m_headline, run_b3_memory,
    in_default_set=False,
)  # fmt: skip
B3P = Benchmark(
    "B3P", "b3p-policy-cost", section_b3_cost, _b3p_headline, run_b3_cost, in_default_set=False
)
