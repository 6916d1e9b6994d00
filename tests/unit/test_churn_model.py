"""B4c's yardstick: if the offline repack were wrong, every ratio in the report would be."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.packing.churn_model import checkpoint, first_fit_decreasing, job_stream, placeable


@pytest.mark.parametrize(
    ("jobs", "capacities", "free", "unplaced"),
    [
        ([], [8, 4], (8, 4), 0),
        ([8], [4, 8], (4, 0), 0),
        # Small jobs fill the 4-GPU node before they break into the 8-GPU one.
        ([2, 1, 1], [8, 4], (8, 0), 0),
        ([4, 4, 2], [8, 4], (2, 0), 0),
        # Decreasing order: the 8 goes first, so the 1s cannot take its node.
        ([1, 8, 1], [8, 8], (0, 6), 0),
        ([8, 8, 8], [8, 8], (0, 0), 1),
        ([8], [4, 4], (4, 4), 1),
    ],
)
def test_first_fit_decreasing(
    jobs: list[int], capacities: list[int], free: tuple[int, ...], unplaced: int
) -> None:
    repack = first_fit_decreasing(jobs, capacities)
    assert (repack.free, repack.unplaced) == (free, unplaced)


@pytest.mark.parametrize(
    ("free", "size", "count"),
    [([8, 4, 3], 8, 1), ([8, 4, 3], 4, 3), ([7, 7], 8, 0), ([16], 8, 2), ([], 4, 0)],
)
def test_placeable(free: list[int], size: int, count: int) -> None:
    assert placeable(free, size) == count


def test_checkpoint_fragmented_against_repack() -> None:
    """Two 8-GPU nodes each half used by small jobs: no 8-GPU job fits, though a repack
    would free one whole node, and the pending 8-GPU job would then run."""
    result = checkpoint({"a": 8, "b": 8, "c": 4}, {"a": [2, 2], "b": [4]}, [8])
    assert result["placeable_8gpu"] == 0
    assert result["ffd_placeable_8gpu"] == 1
    assert result["ratio_8gpu"] == 0.0
    assert result["placeable_4gpu"] == 3
    assert result["ffd_placeable_4gpu"] == 3  # 8 free on one node: 2 fours; the 4-node is full
    assert (result["pending_jobs"], result["ffd_pending_jobs"]) == (1, 0)
    assert result["load"] == 0.4


def test_checkpoint_packed_matches_repack() -> None:
    result = checkpoint({"a": 8, "b": 8, "c": 4}, {"a": [4, 4], "c": [2]}, [])
    assert (result["placeable_8gpu"], result["ffd_placeable_8gpu"]) == (1, 1)
    assert result["ratio_8gpu"] == 1.0
    assert result["ratio_4gpu"] == 1.0


def test_checkpoint_without_room_has_no_ratio() -> None:
    result = checkpoint({"a": 8, "b": 4}, {"a": [8], "b": [2, 1]}, [])
    assert (result["placeable_8gpu"], result["ffd_placeable_8gpu"]) == (0, 0)
    assert result["ratio_8gpu"] is None


def test_job_stream_is_seeded_and_in_range() -> None:
    jobs = job_stream(7, 2000, 60)
    assert jobs == job_stream(7, 2000, 60)
    assert jobs != job_stream(8, 2000, 60)
    assert {j.gpus for j in jobs} == {1, 2, 4, 8}
    assert all(30 <= j.lifetime <= 90 for j in jobs)
    assert all(j.cpu in (4 * j.gpus, 8 * j.gpus, 12 * j.gpus) for j in jobs)
    shares = Counter(j.gpus for j in jobs)
    assert shares[1] > shares[2] > shares[4] > shares[8]
