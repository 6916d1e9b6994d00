"""B3 times creates one by one from the audit log: which events count, and log rotation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.admission.create_latency import AuditCursor, quantile


def event(
    ms: float,
    *,
    stage: str = "ResponseComplete",
    verb: str = "create",
    resource: str = "pods",
    namespace: str = "b3",
    subresource: str | None = None,
    code: int = 201,
) -> str:
    ref: dict[str, Any] = {"resource": resource, "namespace": namespace, "name": "p"}
    if subresource:
        ref["subresource"] = subresource
    micros = round(ms * 1000)
    seconds, fraction = divmod(micros, 1_000_000)
    return json.dumps(
        {
            "stage": stage,
            "verb": verb,
            "objectRef": ref,
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": "2026-12-05T06:00:00.000000Z",
            "stageTimestamp": f"2026-12-05T06:00:{seconds:02d}.{fraction:06d}Z",
        }
    )


def write(path: Path, *lines: str) -> None:
    with path.open("a") as f:
        f.writelines(line + "\n" for line in lines)


@pytest.mark.parametrize(
    ("line", "counted"),
    [
        (event(3.25), [3.25]),
        (event(3, stage="ResponseStarted"), []),
        (event(3, verb="patch"), []),
        (event(3, resource="nodes"), []),
        (event(3, subresource="binding"), []),
        (event(3, namespace="other"), []),
        (event(3, code=409), []),  # refused: it never reached storage
        ('{"stage": "ResponseComplete", "verb": "create", "objectRef": {"resource": "pods"', []),
    ],
)
def test_which_events_are_creates_of_the_namespace(
    tmp_path: Path, line: str, counted: list[float]
) -> None:
    log = tmp_path / "audit.log"
    write(log, event(99))  # before the cursor: not counted
    cursor = AuditCursor.now(log)
    write(log, line)
    assert cursor.creates("b3") == pytest.approx(counted)


def test_a_rotated_log_is_read_to_its_end_before_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write(log, event(1))
    cursor = AuditCursor.now(log)
    write(log, event(2))
    log.rename(tmp_path / "audit-2026-12-05T06-00-00.000.log")  # as the apiserver rotates
    write(log, event(3))
    assert cursor.creates("b3") == pytest.approx([2, 3])


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        ([], 0.5, math.nan),
        ([7.0], 0.99, 7.0),
        ([1.0, 2.0, 3.0, 4.0], 0.5, 2.5),
        (list(map(float, range(101))), 0.99, 99.0),
        ([4.0, 1.0, 3.0, 2.0], 1.0, 4.0),
    ],
)
def test_quantile(values: list[float], q: float, want: float) -> None:
    got = quantile(values, q)
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)
