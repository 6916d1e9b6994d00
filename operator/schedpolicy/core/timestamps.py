"""RFC 3339 timestamps as the API server writes and reads them.

The API server writes `2026-12-01T12:00:00Z`, and MicroTime fields carry up to nine
fractional digits, which a datetime (microseconds) cannot hold. Ranking compares those
to the nanosecond as the ReplicaSet controller does, so it reads them as integers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse(text: str) -> datetime:
    """An aware UTC datetime; ValueError for text that is not RFC 3339 with a zone."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return parsed.astimezone(UTC)


def render(t: datetime) -> str:
    """Whole seconds in UTC with a `Z`, the form of metav1.Time."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds_since(text: str | None, now: datetime) -> float | None:
    """How long ago `text` was; None when there is no timestamp or it does not parse."""
    if not text:
        return None
    try:
        return (now - parse(text)).total_seconds()
    except ValueError:
        return None


def to_nanos(t: datetime) -> int:
    """Exact nanoseconds since the epoch (float seconds would round them)."""
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def parse_nanos(value: Any) -> int | None:
    """A timestamp to nanoseconds since the epoch, its fraction kept to the nanosecond."""
    if not value:
        return None
    text = str(value).replace("Z", "+00:00")
    whole, dot, rest = text.partition(".")
    if not dot:
        return to_nanos(parse(text))
    fraction = rest[: len(rest) - len(rest.lstrip("0123456789"))]
    zone = rest[len(fraction) :]
    return to_nanos(parse(whole + zone)) + int(fraction[:9].ljust(9, "0"))
