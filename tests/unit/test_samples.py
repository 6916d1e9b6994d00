from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from schedpolicy.core.deletion_cost.samples import (
    Rejection,
    Sample,
    check,
    from_annotation,
    from_exposition,
)

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
UID = "uid-1"
MAX_AGE = timedelta(seconds=60)


def ann(value: object, at: datetime | str = NOW, uid: str | None = UID) -> str:
    doc = {"value": value, "observedAt": at if isinstance(at, str) else at.isoformat()}
    if uid is not None:
        doc["podUID"] = uid
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("raw", "outcome"),
    [
        (ann(12), None),
        (ann(0), None),
        (ann("12.5"), None),
        (ann(12, uid=None), None),  # a source that does not name the pod is taken as this pod's
        (ann(12, NOW - timedelta(seconds=59)), None),
        (ann(12, NOW + timedelta(seconds=3)), None),  # small clock skew is tolerated
        (ann("NaN"), "not-finite"),
        (ann("Infinity"), "not-finite"),
        (ann(-1), "negative"),
        (ann(12, NOW + timedelta(minutes=5)), "future"),
        (ann(12, NOW - timedelta(seconds=61)), "stale"),
        (ann(12, uid="someone-else"), "wrong-uid"),
        ("{not json", "malformed"),
        (json.dumps({"value": 1}), "malformed"),
        (json.dumps({"value": True, "observedAt": NOW.isoformat()}), "malformed"),
        (ann(12, "2026-11-30T12:00:00"), "malformed"),  # no time zone
        (None, "no-sample"),
    ],
)
def test_annotation_samples(raw: str | None, outcome: str | None) -> None:
    parsed = from_annotation(raw)
    if isinstance(parsed, Rejection):
        assert parsed.reason == outcome
        return
    rejected = check(parsed, UID, NOW, MAX_AGE)
    assert (rejected.reason if rejected else None) == outcome


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("conns 7\n", 7.0),
        ('# TYPE conns gauge\nconns{pod_uid="uid-1"} 3\nother 9\n', 3.0),
        ("conns NaN\n", "not-finite"),
        ("conns -2\n", "negative"),
        ('conns{pod_uid="uid-2"} 3\n', "wrong-uid"),
        ("other 1\n", "no-sample"),
        ('conns{a="1"} 1\nconns{a="2"} 2\n', "ambiguous"),
        ("conns 1 1700000000000\n", "stale"),  # an explicit sample timestamp is honoured
        ("conns{ 1\n", "malformed"),
    ],
)
def test_exposition_samples(text: str, expected: float | str) -> None:
    parsed = from_exposition(text, "conns", NOW)
    if isinstance(parsed, Sample):
        rejected = check(parsed, UID, NOW, MAX_AGE)
        assert (rejected.reason if rejected else parsed.value) == expected
    else:
        assert parsed.reason == expected
