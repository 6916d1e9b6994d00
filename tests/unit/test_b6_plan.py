"""B6's trace window as a replay plan: one Deployment a task, scaled to 1 and back to 0."""

from __future__ import annotations

from bench.gpu_hours import trace
from bench.gpu_hours.run import plan_of
from bench.replay.plan import Timers


def task(name: str, start: float, end: float, gpus: int = 1) -> trace.Task:
    return trace.Task(name, gpus, 4000, 8192, start, end, rounded_up=False)


def test_each_task_is_scaled_up_at_its_arrival_and_down_at_its_end() -> None:
    window = trace.Window(0, 3000, 30, (task("a", 10, 50), task("b", 20, 30, gpus=8)))
    plan, lengthened = plan_of(window, Timers())
    assert plan.initial == {"a": 0, "b": 0}
    assert [(s.at, s.service, s.replicas) for s in plan.steps] == [
        (10, "a", 1),
        (20, "b", 1),
        (30, "b", 0),
        (50, "a", 0),
    ]
    assert lengthened == 0
    assert plan.duration == 100
    assert plan.gpus_over_time()[2] == (20, {1: 1, 8: 1})


def test_a_task_shorter_than_a_launch_is_lengthened_within_the_window() -> None:
    # 120 s of the trace is 4 s of replay at 30x.
    window = trace.Window(0, 3000, 30, (task("short", 10, 11), task("late", 98, 99)))
    plan, lengthened = plan_of(window, Timers())
    ends = {s.service: s.at for s in plan.steps if s.replicas == 0}
    assert ends == {"short": 14, "late": 100}
    assert lengthened == 2
