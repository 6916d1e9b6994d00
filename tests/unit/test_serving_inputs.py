"""B7's inputs: ServeGen's rates and the serving table, refused with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.replay.plan import PlanError, Timers
from bench.serving import load
from bench.serving.hpa_plan import make_plan

HEADER = "service,bucket_start_s,requests_per_s,input_tokens,output_tokens,token_coverage\n"
SERVICES_HEADER = "name,model,gpus,cpu,memory,target_rps,min_replicas,max_replicas\n"


def day(service: str, rate: float = 10.0) -> str:
    return "".join(f"{service},{i * 600},{rate},1,1,1\n" for i in range(144))


def write(tmp_path: Path, name: str, text: str) -> Path:
    """A file, with the SOURCE.md a trace is read only beside."""
    path = tmp_path / name
    path.write_text(text)
    (tmp_path / "SOURCE.md").write_text("# where t.csv came from\n")
    return path


def test_the_shipped_trace_and_table_make_a_day_with_every_gpu_size() -> None:
    rates = load.read_rates()
    services = load.read_services(models=rates)
    assert set(rates) == {"m-large", "m-mid", "m-small", "mm-image", "deepseek-r1"}
    assert all(len(r.per_bucket) == 144 for r in rates.values())
    assert {s.gpus for s in services} == {0, 1, 2, 4, 8}
    assert rates["deepseek-r1"].at(22 * 3600 + 600) == pytest.approx(42.52)


def test_a_model_with_one_day_repeats_it_for_a_later_day(tmp_path: Path) -> None:
    two = "".join(f"a,{i * 600},{i // 144},1,1,1\n" for i in range(288))
    rates = load.read_rates(write(tmp_path, "t.csv", HEADER + two + day("b", 3)), day=1)
    assert rates["a"].per_bucket[0] == 1.0
    assert rates["b"].per_bucket[0] == 3.0


def test_a_trace_without_its_source_is_refused_naming_the_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", HEADER + day("a"))
    (tmp_path / "SOURCE.md").unlink()
    with pytest.raises(load.LoadError, match=f"{tmp_path}/SOURCE.md: missing: t.csv is read only"):
        load.read_rates(path)


@pytest.mark.parametrize(
    ("wanted", "message"),
    [(2, "day: 2 is beyond the trace's 2 day"), (-1, "day: -1 is negative")],
)
def test_a_day_the_trace_does_not_hold_is_refused(
    tmp_path: Path, wanted: int, message: str
) -> None:
    two = "".join(f"a,{i * 600},1,1,1,1\n" for i in range(288))
    with pytest.raises(load.LoadError, match=message):
        load.read_rates(write(tmp_path, "t.csv", HEADER + two + day("b")), day=wanted)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("service,bucket_start_s\na,0\n", "t.csv:1: requests_per_s: missing column"),
        (HEADER + "a,0,-1,1,1,1\n", "t.csv:2: requests_per_s: -1 is not a finite non-negative"),
        (HEADER + "a,0,nan,1,1,1\n", "t.csv:2: requests_per_s: nan is not a finite"),
        (HEADER + "a,0,x,1,1,1\n", "t.csv:2: requests_per_s: 'x' is not a number"),
        (
            HEADER + "a,0,1,1,1,1\na,30,1,1,1,1\n",
            "t.csv:3: bucket_start_s: 30 is not on the 600 s grid",
        ),
        (HEADER + "a,0,1,1,1,1\na,0,1,1,1,1\n", "t.csv:3: bucket_start_s: a at 0 is listed twice"),
        (HEADER + ",0,1,1,1,1\n", "t.csv:2: service: empty"),
        (HEADER + "a,0,1,1,1,1\n", "a does not cover a whole day"),
    ],
)
def test_a_bad_trace_is_refused_with_file_line_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(load.LoadError, match=message.replace("(", r"\(")):
        load.read_rates(write(tmp_path, "t.csv", text))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("lm,m,3,4,24Gi,10,1,4", "s.csv:2: gpus: 3 GPUs per replica: no instance type holds it"),
        ("lm,m,16,4,24Gi,10,1,4", "s.csv:2: gpus: 16 GPUs per replica"),
        ("lm,nope,1,4,24Gi,10,1,4", "s.csv:2: model: 'nope' is not in the trace"),
        ("lm,m,1,4,24Gi,0,1,4", "s.csv:2: target_rps: must be above 0"),
        ("lm,m,1,4,24Gi,10,5,4", r"s.csv:2: max_replicas: needs 1 <= min \(5\) <= max \(4\)"),
        ("lm,m,1,four,24Gi,10,1,4", "s.csv:2: cpu: 'four' is not a quantity"),
        ("LM,m,1,4,24Gi,10,1,4", "s.csv:2: name: 'LM' is not a DNS label"),
        ("lm,m,1.5,4,24Gi,10,1,4", "s.csv:2: gpus: 1.5 is not a whole number"),
    ],
)
def test_a_bad_service_is_refused_with_file_line_and_field(
    tmp_path: Path, row: str, message: str
) -> None:
    path = write(tmp_path, "s.csv", SERVICES_HEADER + row + "\n")
    with pytest.raises(load.LoadError, match=message):
        load.read_services(path, models=["m"])


def test_a_service_table_without_a_column_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "s.csv", "name,model,gpus\nlm,m,1\n")
    with pytest.raises(load.LoadError, match=r"s\.csv:1: cpu: missing column"):
        load.read_services(path)


def test_the_plan_refuses_more_than_30x_and_a_window_past_the_day(tmp_path: Path) -> None:
    rates = load.read_rates(write(tmp_path, "t.csv", HEADER + day("m")))
    services = load.read_services(
        write(tmp_path, "s.csv", SERVICES_HEADER + "lm,m,1,4,1Gi,5,1,4\n")
    )
    with pytest.raises(PlanError, match="compression 60"):
        make_plan(rates, services, timers=Timers(compression=60))
    with pytest.raises(PlanError, match="not within the day"):
        make_plan(rates, services, first_bucket=140, buckets=10)


def test_a_frontend_follows_every_model_and_timers_shrink_with_the_compression(
    tmp_path: Path,
) -> None:
    rates = load.read_rates(write(tmp_path, "t.csv", HEADER + day("a", 30) + day("b", 50)))
    table = SERVICES_HEADER + "fe,*,0,1,1Gi,20,1,10\nlm,a,2,4,1Gi,10,1,10\n"
    plan = make_plan(rates, load.read_services(write(tmp_path, "s.csv", table)), buckets=3)
    assert plan.initial == {"fe": 4, "lm": 3}
    assert plan.steps == ()
    assert plan.duration == 60.0
    summary = plan.summary()
    assert (summary["hpa_sync_s"], summary["hpa_scale_down_window_s"]) == (0.5, 10.0)
    assert (summary["consolidate_after_s"], summary["startup_s"]) == (10.0, 6.0)
    assert plan.gpus_over_time() == [(0.0, {2: 3})]
