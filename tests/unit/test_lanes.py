"""The benchmarks' lane runner: lanes in turn, rotating; each figure's spread; and when a
difference between two lanes counts."""

from __future__ import annotations

from typing import Any, cast

import pytest

from bench.lanes import (
    Lane,
    apart,
    compare,
    medians,
    order,
    rounded,
    run_in_turn,
    spread,
    summarise,
)
from localcluster import LocalCluster


def test_lanes_take_turns_in_a_rotating_order() -> None:
    assert [order(["a", "b", "c"], r) for r in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]


def test_every_lane_runs_every_repeat_on_the_shared_cluster() -> None:
    shared = cast(LocalCluster, object())
    seen: list[tuple[str, int]] = []

    def lane(name: str) -> Lane:
        def run(cluster: LocalCluster, repeat: int) -> dict[str, Any]:
            assert cluster is shared
            seen.append((name, repeat))
            return {"x": repeat}

        return Lane(name, run)

    runs = run_in_turn([lane("a"), lane("b")], 3, shared)
    assert seen == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2)]
    assert runs == {"a": [{"x": 0}, {"x": 1}, {"x": 2}], "b": [{"x": 0}, {"x": 1}, {"x": 2}]}
    assert summarise(runs, ["x"])["a"]["x"] == {"min": 0, "median": 1, "max": 2}


def test_a_lane_without_its_cluster_is_refused() -> None:
    with pytest.raises(ValueError, match="shares a cluster"):
        run_in_turn([Lane("a", lambda c, r: {})], 1)
    with pytest.raises(ValueError, match="fresh cluster"):
        run_in_turn([Lane("a", lambda c, r: {}, fresh=True)], 1)


@pytest.mark.parametrize(
    ("a", "b", "real"),
    [
        ([1, 2, 3], [4, 5, 6], True),
        ([1, 2, 4], [4, 5, 6], False),  # touching ranges overlap
        ([1, 5, 9], [4, 5, 6], False),
        ([7, 8], [1, 2], True),
        ([None], [1], False),
    ],
)
def test_a_difference_is_real_only_when_the_ranges_are_apart(
    a: list[float | None], b: list[float | None], real: bool
) -> None:
    assert apart(spread(a), spread(b)) is real
    compared = compare({"x": spread(a)}, {"x": spread(b)}, ["x"])["x"]
    assert compared["ranges_apart"] is real


def test_one_run_is_its_own_median() -> None:
    run = {"seconds": 1.23456, "q": {0.5: 2.0}, "burst": {"shares": {"5 ms": 0.3}}, "by": [1, 2]}
    assert medians([run]) == run


def test_medians_go_through_dicts_and_lists_and_leave_the_rest_to_the_first_run() -> None:
    runs = [
        {"x": 1, "q": {0.5: 3.0}, "per_zone": [1, 9], "name": "a", "ok": True, "skew": None},
        {"x": 5, "q": {0.5: 1.0}, "per_zone": [3, 7], "name": "b", "ok": False, "skew": 2.0},
        {"x": 2, "q": {0.5: 2.0}, "per_zone": [2, 8], "name": "c", "ok": False, "skew": 4.0},
    ]
    assert medians(runs) == {
        "x": 2,
        "q": {0.5: 2.0},
        "per_zone": [2, 8],
        "name": "a",
        "ok": True,
        "skew": 3.0,
    }
    with pytest.raises(ValueError, match="no runs"):
        medians([])


def test_rounded_rounds_floats_only() -> None:
    assert rounded({"a": [1.23456, 2], "b": {"c": None, "d": 0.5}}, 2) == {
        "a": [1.23, 2],
        "b": {"c": None, "d": 0.5},
    }
