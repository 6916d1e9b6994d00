"""bench/registry.py is the one list of benchmarks: every committed result belongs to one of
them, and each renders its report section and its headline from what it saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report
from bench.__main__ import chosen
from bench.charts import RESULTS
from bench.registry import BENCHMARKS, of_result
from bench.scale import SCALES

SAVED = sorted(RESULTS.glob("*.json"))


def test_tags_and_keys_are_unique() -> None:
    assert len({b.tag for b in BENCHMARKS}) == len({b.key for b in BENCHMARKS}) == len(BENCHMARKS)


@pytest.mark.parametrize("path", SAVED, ids=lambda p: p.stem)
def test_each_saved_result_renders_as_its_benchmark(path: Path) -> None:
    name = path.stem
    result = json.loads(path.read_text())
    bench = of_result(name)
    if bench is None:
        # The one kind of side result: B2's point at one scale, beside b2-memory.json.
        assert name.removeprefix("b2-memory-") in SCALES, f"{name}.json belongs to no benchmark"
        return
    title, *_ = report.section(name, result)
    assert title.startswith("## ")
    if "error" not in result:
        assert bench.headline(result).upper().startswith(bench.tag.replace("DRA", "-DRA"))


@pytest.mark.parametrize(
    ("only", "tags"),
    [
        ("", ["B1", "B3", "B4", "B4DRA", "B4C", "B5", "B5G", "B6", "B7"]),
        ("b2", ["B2"]),
        ("B8,B2,B1", ["B1", "B8"]),  # the registry's order; B1's run measures B2 too
        ("B7E", ["B7E"]),
    ],
)
def test_only_picks_in_the_registrys_order(only: str, tags: list[str]) -> None:
    assert [b.tag for b in chosen(only)] == tags


def test_an_unknown_tag_is_refused_with_the_list() -> None:
    with pytest.raises(SystemExit, match="no benchmark B9; there are B1, B2"):
        chosen("B1,B9")
