"""What a benchmark is to `python -m bench` and to REPORT.md: one `Benchmark` value, defined in
its package's `benchmark.py` and listed once in bench/registry.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.scale import Scale
from localcluster import LocalCluster

Result = dict[str, Any]


@dataclass(frozen=True)
class Options:
    """Everything a run gets: the shared cluster (unused by a benchmark that brings its own),
    the scale, where plots go, and B7's and B7E's inputs from the command line (the trace, its
    day, and the lanes; None: those bench/replay/lanes.yaml gives the benchmark)."""

    cluster: LocalCluster
    scale: Scale
    out: Path
    trace: Path
    day: int
    lanes: tuple[str, ...] | None


@dataclass(frozen=True)
class Benchmark:
    """`tag` is the name `--only` takes; `key` names bench/results/<key>.json and the report's
    section (a key with `-day<N>` after it is the same benchmark on another day of its trace).

    `run` is the usual benchmark: the shared cluster, the scale and the plots' directory in,
    its result out. `run_with` replaces it where a benchmark needs the command line's inputs or
    returns more than its own result (B1 measures B2 on the same fleet): results by key.
    `check` refuses bad command-line input before any cluster starts."""

    tag: str
    key: str
    section: Callable[[Result], list[str]]
    headline: Callable[[Result], str]
    run: Callable[[LocalCluster, Scale, Path], Result] | None = None
    run_with: Callable[[Options], dict[str, Result]] | None = None
    in_default_set: bool = True
    # B6 and B7 bring clusters of their own (Karpenter's nodes only).
    own_cluster: bool = False
    # Tags whose results this one's run produces as well: they are not run again.
    covers: tuple[str, ...] = ()
    check: Callable[[Options], None] | None = None

    def __post_init__(self) -> None:
        if (self.run is None) == (self.run_with is None):
            raise ValueError(f"{self.tag}: exactly one of run and run_with")

    def results(self, options: Options) -> dict[str, Result]:
        if self.run_with is not None:
            return self.run_with(options)
        assert self.run is not None
        return {self.key: self.run(options.cluster, options.scale, options.out)}
