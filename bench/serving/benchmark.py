"""B7 and B7E as `python -m bench` runs them: on clusters of their own, with the trace, day
and lanes from the command line, each checked before any cluster starts."""

from __future__ import annotations

from collections.abc import Callable

from bench.benchmark import Benchmark, Options, Result
from bench.replay.section import lanes_headline
from bench.scale import Scale
from bench.serving import run
from bench.serving.section import section_b7, section_b7e


def _size(scale: Scale) -> str:
    return scale.name if scale.name in run.SIZES else "full"


def _runner(name: str) -> Callable[[Options], dict[str, Result]]:
    def go(o: Options) -> dict[str, Result]:
        result = run.run_b7(
            _size(o.scale), o.out, name=name, trace=o.trace, day=o.day, lanes=o.lanes
        )
        return {run.result_name(name, o.day): result}

    return go


def _checker(name: str) -> Callable[[Options], None]:
    def check(o: Options) -> None:
        run.prepare(name, _size(o.scale), o.trace, o.day, o.lanes)

    return check


def _serving(name: str, key: str, section: Callable[[Result], list[str]]) -> Benchmark:
    return Benchmark(
        name,
        key,
        section,
        lanes_headline(name),
        run_with=_runner(name),
        in_default_set=name == run.B7,
        own_cluster=True,
        check=_checker(name),
    )


B7 = _serving(run.B7, "b7-serving", section_b7)
B7E = _serving(run.B7E, "b7e-no-eviction", section_b7e)
