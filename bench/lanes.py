"""The one lane runner every benchmark uses.

A benchmark is a set of lanes (the product against its baselines) measured on the same load.
`run_in_turn` runs each lane `repeats` times, lanes taking turns in a rotating order so that
drift in the machine falls on every lane alike, on a shared cluster or a fresh one per run;
`summarise` gives each figure's min, median and max per lane, and `medians` one lane's figures
as a single run's, each the median of its runs'; and a difference between two lanes is called
real only when their ranges do not overlap (`apart`). bench.replay.waves
runs Karpenter lanes side by side instead of in turn, with the same summary.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster import LocalCluster

Figures = dict[str, Any]
Spread = dict[str, float | None]


@dataclass(frozen=True)
class Lane:
    """One way of running the benchmark's load: `run(cluster, repeat)` measures it once and
    returns its figures. `fresh`: each run gets a cluster of its own (started and stopped
    around it); otherwise runs share the benchmark's cluster."""

    name: str
    run: Callable[[LocalCluster, int], Figures]
    fresh: bool = False


def order(names: Sequence[str], repeat: int) -> list[str]:
    """The lanes' order in round `repeat`: rotated by one each round."""
    k = repeat % len(names) if names else 0
    return [*names[k:], *names[:k]]


def run_in_turn(
    lanes: Sequence[Lane],
    repeats: int,
    shared: LocalCluster | None = None,
    workdir: Path | None = None,
) -> dict[str, list[Figures]]:
    """Every lane `repeats` times; each lane's figures, run by run."""
    by_name = {lane.name: lane for lane in lanes}
    runs: dict[str, list[Figures]] = {lane.name: [] for lane in lanes}
    for repeat in range(repeats):
        for name in order(list(by_name), repeat):
            lane = by_name[name]
            runs[name].append(_once(lane, repeat, shared, workdir))
    return runs


def _once(lane: Lane, repeat: int, shared: LocalCluster | None, workdir: Path | None) -> Figures:
    if not lane.fresh:
        if shared is None:
            raise ValueError(f"lane {lane.name} shares a cluster, and none was given")
        return lane.run(shared, repeat)
    if workdir is None:
        raise ValueError(f"lane {lane.name} needs a fresh cluster, and no workdir was given")
    cluster = LocalCluster(workdir / f"{lane.name}-{repeat}")
    cluster.up()
    try:
        return lane.run(cluster, repeat)
    finally:
        cluster.down()


def spread(values: Iterable[float | None]) -> Spread:
    found = [v for v in values if v is not None]
    if not found:
        return {"min": None, "median": None, "max": None}
    return {"min": min(found), "median": statistics.median(found), "max": max(found)}


def apart(a: Spread, b: Spread) -> bool:
    """Whether two ranges do not overlap: only then is a difference called real."""
    if None in (a["min"], a["max"], b["min"], b["max"]):
        return False
    return a["max"] < b["min"] or b["max"] < a["min"]  # type: ignore[operator]


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarise(runs: Mapping[str, Sequence[Figures]], keys: Iterable[str]) -> dict[str, Any]:
    """Each lane's min, median and max of every figure in `keys`."""
    wanted = list(keys)
    return {
        lane: {key: spread(f.get(key) for f in figures) for key in wanted}
        for lane, figures in runs.items()
    }


def compare(a: Mapping[str, Spread], b: Mapping[str, Spread], keys: Iterable[str]) -> Figures:
    """Lane `a` against lane `b`, figure by figure: the ratio of medians, and whether the
    ranges are apart."""
    return {
        key: {
            "ratio_of_medians": ratio(a[key]["median"], b[key]["median"]),
            "ranges_apart": apart(a[key], b[key]),
        }
        for key in keys
    }


def medians(runs: Sequence[Figures]) -> Figures:
    """A lane's runs as one run's figures: each number the median of its runs' (None left out),
    through dicts and through lists of one length; anything else (a name, a flag, lists of
    other lengths) the first run's. One run gives its own figures back, unchanged."""
    if not runs:
        raise ValueError("no runs to take the medians of")
    return dict(_median(list(runs)))


def _median(values: list[Any]) -> Any:
    if len(values) == 1:
        return values[0]
    found = [v for v in values if v is not None]
    if not found:
        return None
    head = found[0]
    if all(isinstance(v, dict) for v in found):
        return {key: _median([v.get(key) for v in found]) for key in head}
    if all(isinstance(v, list) and len(v) == len(head) for v in found):
        return [_median([v[i] for v in found]) for i in range(len(head))]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in found):
        return statistics.median(found)
    return values[0]


def rounded(figures: Any, digits: int = 3) -> Any:
    """Every float in `figures` rounded to `digits`, through dicts and lists: the spreads a
    result keeps, computed from unrounded runs."""
    if isinstance(figures, float):
        return round(figures, digits)
    if isinstance(figures, dict):
        return {key: rounded(value, digits) for key, value in figures.items()}
    if isinstance(figures, list):
        return [rounded(value, digits) for value in figures]
    return figures
