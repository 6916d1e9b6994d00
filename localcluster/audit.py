"""Reads the apiserver's audit log: the evidence of who wrote what, and when."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The operator runs as the chart's ServiceAccount (see localcluster).
OPERATOR_USER = "system:serviceaccount:schedpolicy-system:schedpolicy"


@dataclass(frozen=True)
class AuditEvent:
    user: str
    agent: str
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    at: datetime
    request: Any
    # The pod a bound ServiceAccount token was issued to (empty for other credentials).
    pod: str = ""
    # When the apiserver received the request (`at` is when it answered).
    received: datetime | None = None
    # objectRef.uid: set when the request's body named it (a pod's binding names the pod's).
    uid: str = ""

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> AuditEvent:
        ref = raw.get("objectRef") or {}
        extra = raw.get("user", {}).get("extra") or {}
        return cls(
            user=raw.get("user", {}).get("username", ""),
            agent=raw.get("userAgent", ""),
            verb=raw.get("verb", ""),
            resource=ref.get("resource", ""),
            subresource=ref.get("subresource", ""),
            namespace=ref.get("namespace", ""),
            name=ref.get("name", ""),
            code=int((raw.get("responseStatus") or {}).get("code", 0)),
            at=_time(raw["stageTimestamp"]) or datetime.min,
            request=raw.get("requestObject"),
            pod=next(iter(extra.get("authentication.kubernetes.io/pod-name", [])), ""),
            received=_time(raw.get("requestReceivedTimestamp")),
            uid=ref.get("uid", ""),
        )


def _time(stamp: str | None) -> datetime | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


def now() -> datetime:
    """A timestamp comparable with the audit log's, for `writes_by(since=)`."""
    return datetime.now(UTC)


def events(log: Path) -> Iterator[AuditEvent]:
    with log.open() as f:
        for line in f:
            raw = json.loads(line)
            if raw.get("stage") == "ResponseComplete":
                yield AuditEvent.parse(raw)


def writes_by(
    log: Path, user: str = OPERATOR_USER, *, since: datetime | None = None
) -> list[AuditEvent]:
    return [
        e
        for e in events(log)
        if e.user == user
        and e.verb in ("create", "update", "patch", "delete", "deletecollection")
        and (since is None or e.at >= since)
    ]
