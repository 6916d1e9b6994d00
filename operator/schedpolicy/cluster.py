"""The operator's in-memory view of the cluster, fed only by watch events. No I/O.

Objects are reduced to the few fields the decisions need as they arrive, which
keeps memory flat on large clusters and keeps the pure core independent of
kopf's and the client's object types.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from schedpolicy.api import SpecError, parse_spec
from schedpolicy.matching import Policy


@dataclass(frozen=True)
class PolicyObject:
    """A SchedulingPolicy as stored: parsed when valid, with the reason when not."""

    name: str
    uid: str
    generation: int
    status: Mapping[str, Any]
    policy: Policy | None
    error: SpecError | None


def policy_object(body: Mapping[str, Any]) -> PolicyObject:
    meta = body.get("metadata", {})
    name, generation = str(meta.get("name", "")), int(meta.get("generation") or 1)
    uid = str(meta.get("uid", ""))
    try:
        spec = parse_spec(body.get("spec") or {})
    except SpecError as err:
        return PolicyObject(name, uid, generation, body.get("status") or {}, None, err)
    policy = Policy(name=name, spec=spec, generation=generation, uid=uid)
    return PolicyObject(name, uid, generation, body.get("status") or {}, policy, None)


class ClusterView:
    def __init__(self) -> None:
        self._policies: dict[str, PolicyObject] = {}

    def upsert_policy(self, body: Mapping[str, Any]) -> PolicyObject:
        obj = policy_object(body)
        self._policies[obj.name] = obj
        return obj

    def remove_policy(self, name: str) -> None:
        self._policies.pop(name, None)

    def policy_objects(self) -> Iterator[PolicyObject]:
        return iter(sorted(self._policies.values(), key=lambda p: p.name))

    def policies(self) -> list[Policy]:
        return [o.policy for o in self.policy_objects() if o.policy is not None]
