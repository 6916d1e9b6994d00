"""Who wrote and who deleted each pod's pod-deletion-cost, from the apiserver's audit log: the
figures the gate's write-war test prints and judges. Pure over AuditEvents.

The audit policy keeps the request body of every pod patch and update (localcluster/
apiserver.py). The operator sends JSON Patches (`add` sets the key, `remove` deletes it);
Karpenter's gate sends merge patches (`metadata.annotations[key]` set to a value, or to null
to delete it, with a resourceVersion for its optimistic lock); kubectl's annotate sends merge
patches too. An update carries the whole object: the key there or not, against what the log
showed last.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from localcluster.audit import OPERATOR_USER, AuditEvent
from schedpolicy.core.wellknown import COST_ANNOTATION

Action = Literal["write", "delete"]
_MISSING = object()


def _pointer(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def writer(e: AuditEvent) -> str:
    return "schedpolicy" if e.user == OPERATOR_USER else e.user


def actions(request: Any, key: str, before: str | None) -> list[tuple[Action, str | None]]:
    """What one accepted request did to `key`: writes (with the value) and deletions."""
    if isinstance(request, list):  # JSON Patch
        out: list[tuple[Action, str | None]] = []
        for op in request:
            path, kind = op.get("path"), op.get("op")
            if path == _pointer(key) and kind in ("add", "replace"):
                out.append(("write", str(op.get("value"))))
            elif path == _pointer(key) and kind == "remove":
                out.append(("delete", None))
            elif path == "/metadata/annotations" and kind == "add":
                if key in (op.get("value") or {}):
                    out.append(("write", str(op["value"][key])))
                elif before is not None:
                    out.append(("delete", None))  # a whole new map without it
        return out
    if isinstance(request, dict):
        meta = request.get("metadata") or {}
        annotations = meta.get("annotations", _MISSING)
        if request.get("kind") == "Pod" and "spec" in request:  # an update: the whole pod
            value = (annotations if isinstance(annotations, dict) else {}).get(key)
            if value is None:
                return [("delete", None)] if before is not None else []
            return [("write", str(value))] if str(value) != before else []
        if isinstance(annotations, dict) and key in annotations:
            value = annotations[key]
            return [("delete", None)] if value is None else [("write", str(value))]
        if annotations is None and before is not None:  # all annotations deleted
            return [("delete", None)]
    return []


@dataclass
class PodHistory:
    """One pod's key, turn by turn."""

    turns: list[tuple[str, Action, str | None]] = field(default_factory=list)

    @property
    def hand_changes(self) -> int:
        """How many times the next action on the key came from another writer."""
        return sum(1 for a, b in zip(self.turns, self.turns[1:], strict=False) if a[0] != b[0])

    def rewrites_after_deletion(self) -> tuple[int, int]:
        """(by another writer than the one that deleted it, by the same writer)."""
        other = same = 0
        for (who, did, _), (next_who, next_did, _) in zip(self.turns, self.turns[1:], strict=False):
            if did == "delete" and next_did == "write":
                if next_who == who:
                    same += 1
                else:
                    other += 1
        return other, same


@dataclass
class Figures:
    pods: dict[str, PodHistory]
    writes: Counter[str]  # writer -> writes of the key
    deletions: Counter[str]  # writer -> deletions of the key

    @property
    def hand_changes(self) -> int:
        return sum(h.hand_changes for h in self.pods.values())

    def changed_hands_twice(self) -> dict[str, list[str]]:
        """Pods whose key changed hands more than once, with the turns."""
        return {
            pod: [f"{who} {did} {value or ''}".strip() for who, did, value in h.turns]
            for pod, h in self.pods.items()
            if h.hand_changes > 1
        }

    def rewritten_after_deletion(self, *, more_than: int = 1) -> dict[str, tuple[int, int]]:
        """Pods whose key was deleted and written again by another writer more than
        `more_than` times: (by another writer, by the same)."""
        return {
            pod: h.rewrites_after_deletion()
            for pod, h in self.pods.items()
            if h.rewrites_after_deletion()[0] > more_than
        }

    def lines(self) -> list[str]:
        other = sum(h.rewrites_after_deletion()[0] for h in self.pods.values())
        same = sum(h.rewrites_after_deletion()[1] for h in self.pods.values())
        most = max((h.hand_changes for h in self.pods.values()), default=0)
        return [
            f"pods whose cost was touched: {len(self.pods)}",
            "writes by writer: "
            + (", ".join(f"{w} {n}" for w, n in sorted(self.writes.items())) or "none"),
            "deletions by writer: "
            + (", ".join(f"{w} {n}" for w, n in sorted(self.deletions.items())) or "none"),
            f"hand changes: {self.hand_changes} in all, at most {most} on one pod",
            f"deleted, then written again: {other} by another writer, {same} by the same",
        ]


def figures(
    events: Iterable[AuditEvent],
    namespace: str,
    key: str = COST_ANNOTATION,
    since: Any = None,
) -> Figures:
    """Every accepted write and deletion of `key` on the pods of `namespace`."""
    pods: dict[str, PodHistory] = defaultdict(PodHistory)
    current: dict[str, str | None] = {}
    writes: Counter[str] = Counter()
    deletions: Counter[str] = Counter()
    for e in events:
        if e.resource != "pods" or e.subresource or e.namespace != namespace:
            continue
        if e.verb not in ("patch", "update") or not 200 <= e.code < 300:
            continue
        if since is not None and e.at < since:
            continue
        for did, value in actions(e.request, key, current.get(e.name)):
            who = writer(e)
            pods[e.name].turns.append((who, did, value))
            current[e.name] = value
            (writes if did == "write" else deletions)[who] += 1
    return Figures(dict(pods), writes, deletions)
