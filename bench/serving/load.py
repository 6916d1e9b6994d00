"""B7's inputs, read and checked before any cluster starts: ServeGen's 10-minute request rates
(shared/data/servegen-llm/load_10min.csv) and the table of serving Deployments that turns each
model's rate into replicas (services.csv beside this file). Pure, apart from reading files.

Every refusal names the file, the line and the field: a missing column, a rate that is not a
finite non-negative number, a service the trace lacks, a GPU size no instance type can hold.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.datasets import MissingSource, require_source, shared_data
from bench.replay.plan import Shape

TRACE_ENV = "SCHEDPOLICY_SERVEGEN_TRACE"
DEFAULT_TRACE = shared_data("servegen-llm/load_10min.csv", TRACE_ENV)
SERVICES = Path(__file__).with_name("services.csv")
BUCKET_SECONDS = 600
DAY_SECONDS = 86_400
TRACE_COLUMNS = ("service", "bucket_start_s", "requests_per_s")
SERVICE_COLUMNS = (
    "name",
    "model",
    "gpus",
    "cpu",
    "memory",
    "target_rps",
    "min_replicas",
    "max_replicas",
)
# The GPU counts a replica may ask for: those the harness's GPU instance types hold whole.
GPU_SIZES = (0, 1, 2, 4, 8)
# A frontend follows the sum of every model's rate.
ALL_MODELS = "*"
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|[KMGT]i)?")


class LoadError(ValueError):
    """A refused input; the message starts with `file:line: field`."""


def _fail(path: Path, line: int, field: str, why: str) -> LoadError:
    return LoadError(f"{path}:{line}: {field}: {why}")


@dataclass(frozen=True)
class Rates:
    """One model's request rate, one value per 10-minute bucket of the day read."""

    service: str
    per_bucket: tuple[float, ...]

    def at(self, trace_seconds: float) -> float:
        index = min(int(trace_seconds // BUCKET_SECONDS), len(self.per_bucket) - 1)
        return self.per_bucket[max(index, 0)]


@dataclass(frozen=True)
class Service:
    """A serving Deployment: `model`'s rate over `target_rps` per replica makes its replicas."""

    name: str
    model: str  # a trace service, or ALL_MODELS
    gpus: int
    cpu: str
    memory: str
    target_rps: float
    min_replicas: int
    max_replicas: int

    @property
    def shape(self) -> Shape:
        return Shape(self.name, self.gpus, self.cpu, self.memory)


def _columns(path: Path, header: Iterable[str] | None, wanted: Iterable[str]) -> None:
    have = set(header or ())
    for column in wanted:
        if column not in have:
            raise _fail(path, 1, column, "missing column")


def _number(path: Path, line: int, field: str, text: str | None) -> float:
    try:
        value = float(text if text is not None else "")
    except ValueError:
        raise _fail(path, line, field, f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise _fail(path, line, field, f"{text} is not a finite non-negative number")
    return value


def _whole(path: Path, line: int, field: str, text: str | None) -> int:
    value = _number(path, line, field, text)
    if value != int(value):
        raise _fail(path, line, field, f"{text} is not a whole number")
    return int(value)


def read_rates(path: Path = DEFAULT_TRACE, day: int = 0) -> dict[str, Rates]:
    """Every model's rates over day `day` (from 0), bucket by bucket. A model whose trace has
    fewer days (mm-image and deepseek-r1 have one) repeats its last day."""
    if not path.exists():
        raise LoadError(f"{path}: missing (ServeGen's rates, see its SOURCE.md)")
    try:
        require_source(path)
    except MissingSource as err:
        raise LoadError(str(err)) from None
    if day < 0:
        raise LoadError(f"{path}: day: {day} is negative")
    buckets: dict[str, dict[int, float]] = {}
    with path.open(newline="") as f:
        rows = csv.DictReader(f)
        _columns(path, rows.fieldnames, TRACE_COLUMNS)
        for line, row in enumerate(rows, start=2):
            service = row["service"] or ""
            if not service:
                raise _fail(path, line, "service", "empty")
            start = _whole(path, line, "bucket_start_s", row["bucket_start_s"])
            if start % BUCKET_SECONDS:
                raise _fail(path, line, "bucket_start_s", f"{start} is not on the 600 s grid")
            rate = _number(path, line, "requests_per_s", row["requests_per_s"])
            if start // BUCKET_SECONDS in buckets.setdefault(service, {}):
                raise _fail(path, line, "bucket_start_s", f"{service} at {start} is listed twice")
            buckets[service][start // BUCKET_SECONDS] = rate
    per_day = DAY_SECONDS // BUCKET_SECONDS
    days = {service: (max(b) + 1) // per_day for service, b in buckets.items()}
    for service, by_index in buckets.items():
        if days[service] == 0 or len(by_index) < days[service] * per_day:
            raise LoadError(f"{path}: {service} does not cover a whole day of 10-minute buckets")
    longest = max(days.values(), default=0)
    if day >= longest:
        raise LoadError(
            f"{path}: day: {day} is beyond the trace's {longest} day(s) (0 to {longest - 1})"
        )
    rates: dict[str, Rates] = {}
    for service, by_index in buckets.items():
        first = min(day, days[service] - 1) * per_day
        rates[service] = Rates(service, tuple(by_index[first + i] for i in range(per_day)))
    return rates


def read_services(path: Path = SERVICES, models: Iterable[str] | None = None) -> list[Service]:
    """The serving table, each row checked; `models` (the trace's services) must hold every
    model a row names."""
    known = set(models) if models is not None else None
    found: list[Service] = []
    with path.open(newline="") as f:
        rows = csv.DictReader(f)
        _columns(path, rows.fieldnames, SERVICE_COLUMNS)
        for line, row in enumerate(rows, start=2):
            found.append(_service(path, line, row, known))
    names = [s.name for s in found]
    if len(set(names)) != len(names):
        raise LoadError(f"{path}: a service name is listed twice")
    if not found:
        raise LoadError(f"{path}: no service")
    return found


def _service(path: Path, line: int, row: Mapping[str, str], known: set[str] | None) -> Service:
    name = row["name"] or ""
    if not name or not name.replace("-", "").isalnum() or name != name.lower():
        raise _fail(path, line, "name", f"{name!r} is not a DNS label")
    model = row["model"] or ""
    if model != ALL_MODELS and known is not None and model not in known:
        raise _fail(
            path, line, "model", f"{model!r} is not in the trace ({', '.join(sorted(known))})"
        )
    gpus = _whole(path, line, "gpus", row["gpus"])
    if gpus not in GPU_SIZES:
        raise _fail(
            path, line, "gpus", f"{gpus} GPUs per replica: no instance type holds it ({GPU_SIZES})"
        )
    target = _number(path, line, "target_rps", row["target_rps"])
    if target <= 0:
        raise _fail(path, line, "target_rps", "must be above 0")
    low = _whole(path, line, "min_replicas", row["min_replicas"])
    high = _whole(path, line, "max_replicas", row["max_replicas"])
    if low < 1 or high < low:
        raise _fail(path, line, "max_replicas", f"needs 1 <= min ({low}) <= max ({high})")
    for field in ("cpu", "memory"):
        if not _QUANTITY.fullmatch(row[field] or ""):
            raise _fail(path, line, field, f"{row[field]!r} is not a quantity such as 4 or 24Gi")
    return Service(name, model, gpus, row["cpu"], row["memory"], target, low, high)


def rate_of(service: Service, rates: Mapping[str, Rates], trace_seconds: float) -> float:
    if service.model == ALL_MODELS:
        return sum(r.at(trace_seconds) for r in rates.values())
    return rates[service.model].at(trace_seconds)
