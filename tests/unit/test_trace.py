"""The Alibaba trace window B6 replays."""

from __future__ import annotations

import pytest

from bench.gpu_hours import trace


def row(name: str, gpus: int, milli: int, created: int, deleted: int) -> dict[str, str]:
    return {
        "name": name,
        "cpu_milli": "4000",
        "memory_mib": "8192",
        "num_gpu": str(gpus),
        "gpu_milli": str(milli),
        "creation_time": str(created),
        "deletion_time": str(deleted),
    }


ROWS = [
    row("early", 1, 1000, 50, 500),  # before the window
    row("cpu-only", 0, 0, 120, 300),
    row("half", 1, 460, 100, 340),  # a fraction of a GPU: one whole GPU
    row("eight", 8, 1000, 200, 2000),  # outlives the window: stopped at its end
    row("four", 4, 1000, 400, 700),
    row("late", 2, 1000, 1100, 1200),  # after the window
]


def test_a_window_keeps_gpu_tasks_created_in_it_rounded_up_and_stopped_at_its_end() -> None:
    found = trace.window(ROWS, first=100, length=1000, compression=10)
    by_name = {t.name: t for t in found.tasks}
    assert list(by_name) == ["half", "eight", "four"]
    assert (by_name["half"].gpus, by_name["half"].rounded_up) == (1, True)
    assert (by_name["half"].start, by_name["half"].end) == (0.0, 24.0)
    assert (by_name["eight"].start, by_name["eight"].end) == (10.0, 100.0)
    assert found.replay_seconds == 100
    assert found.summary()["tasks_by_gpus"] == {"1": 1, "4": 1, "8": 1}
    assert found.summary()["fractional_rounded_up"] == 1


def test_the_packed_bound_and_the_peak() -> None:
    tasks = trace.window(ROWS, first=100, length=1000, compression=10).tasks
    needed = 1 * 24 + 8 * 90 + 4 * 30
    assert trace.packed_lower_bound(tasks, 8) == needed / 8
    assert trace.peak_gpus(tasks) == 12  # eight and four, once half has ended


def test_a_malformed_row_names_its_line_and_field() -> None:
    bad = [*ROWS[:2], {**ROWS[2], "num_gpu": "one"}]
    with pytest.raises(trace.TraceError, match=r"line 4: num_gpu='one' is not an integer"):
        trace.window(bad, first=100, length=1000, compression=10)


def test_an_empty_window_is_refused() -> None:
    with pytest.raises(trace.TraceError, match="no GPU task"):
        trace.window(ROWS, first=5000, length=10, compression=1)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([3.0], 95, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 95, 4.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float | None) -> None:
    assert trace.percentile(values, q) == expected
