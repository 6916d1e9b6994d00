"""The memory lane's heap report: it names where the Python heap grew, and its section
shows what each part of the process held."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from bench.admission.memory import _growth
from bench.admission.section import section_b3_memory


def test_the_growth_report_names_the_line_that_allocated(tmp_path: Path) -> None:
    tracemalloc.start(4)
    try:
        tracemalloc.take_snapshot().dump(str(tmp_path / "0.snap"))
        held = [bytes(1024) for _ in range(4096)]  # 4 MiB, held across the second snapshot
        tracemalloc.take_snapshot().dump(str(tmp_path / "1.snap"))
    finally:
        tracemalloc.stop()
    report = _growth(tmp_path / "0.snap", tmp_path / "1.snap", top=3)
    top = report[report.index("## grown, by filename") + 2]
    assert top.strip().startswith("+4.")
    assert Path(__file__).name in report[report.index("## grown, by filename") + 3]
    assert len(held) == 4096


def test_the_section_shows_each_stage_of_the_traced_run() -> None:
    figures = {
        "VmRSS": 120.0,
        "VmHWM": 130.0,
        "traced_mib": 20.5,
        "traced_peak_mib": 40.0,
        "malloc_in_use_mib": 30.0,
        "malloc_free_kept_mib": 12.0,
    }
    result = {
        "webhook_memory": {
            "idle": {"VmRSS": 90.0, "VmHWM": 90.0},
            "after_5000": {"VmRSS": 150.0, "VmHWM": 160.0, "pods_without_hints": 0},
            "grew_mib": 70.0,
        },
        "heap": {"idle": figures, "after_5000": figures},
    }
    text = "\n".join(section_b3_memory(result))
    assert "70.0 MiB over idle" in text
    assert "| after 5000 | 120.0 | 20.5 | 30.0 | 12.0 |" in text
