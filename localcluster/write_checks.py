"""What the operator wrote, judged from the apiserver's audit log. Pure over AuditEvents.

Three questions, asked by the e2e aftermath and by B7's whole-run audit under Karpenter:
- `unowned_writes`: did any accepted write touch something the operator does not own?
- `changed_hands`: did a deletion cost pass from one writer to another and back?
- `writes_to_gone`: how many writes reached a pod or node after its deletion began, or after
  it was removed, judged on the apiserver's own clock; did any of them change anything?
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from localcluster.audit import OPERATOR_USER, AuditEvent
from schedpolicy.core.policy.model import is_reserved_label_domain
from schedpolicy.core.wellknown import COST_ANNOTATION, KARPENTER_COST_ANNOTATION

COST_KEYS = (COST_ANNOTATION, KARPENTER_COST_ANNOTATION)
OWNED_LABELS_ANNOTATION = "schedpolicy.io/owned-labels"
# (resource, subresource, verb) the controller and the webhook may send at all.
ALLOWED_CALLS = frozenset(
    {
        ("pods", "", "patch"),
        ("nodes", "", "patch"),
        ("schedulingpolicies", "status", "patch"),
        ("events", "", "create"),
        ("leases", "", "create"),
        ("leases", "", "update"),
        ("tokenreviews", "", "create"),
        ("subjectaccessreviews", "", "create"),
        # Policy mode: the compiled policies (server-side apply creates them too), and the
        # webhook's match condition.
        ("mutatingadmissionpolicies", "", "patch"),
        ("mutatingadmissionpolicies", "", "delete"),
        ("mutatingadmissionpolicybindings", "", "patch"),
        ("mutatingadmissionpolicybindings", "", "delete"),
        ("mutatingwebhookconfigurations", "", "patch"),
    }
)


def _pointer(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def operator_attempts(events: Iterable[AuditEvent], user: str = OPERATOR_USER) -> list[AuditEvent]:
    """The operator processes' own writes: they send `schedpolicy/...` or kopf's agent, never
    kubectl's (a test may send writes with the same token through kubectl, on purpose)."""
    return [
        e
        for e in events
        if e.user == user
        and e.verb in ("create", "update", "patch", "delete", "deletecollection")
        and not e.agent.startswith("kubectl/")
    ]


def unowned_writes(attempts: Iterable[AuditEvent], release_namespace: str) -> list[str]:
    """Each write outside what the operator owns, described; [] when there is none.

    A refused request is logged without its body and changed nothing: calls are checked for
    every attempt, bodies for accepted writes only."""
    found: list[str] = []
    for e in attempts:
        call = (e.resource, e.subresource, e.verb)
        if call not in ALLOWED_CALLS:
            found.append(f"{e.verb} {e.resource}/{e.subresource} {e.namespace}/{e.name}")
        elif 200 <= e.code < 300:
            found += [
                f"{e.resource} {e.namespace}/{e.name}: {p}" for p in _body(e, release_namespace)
            ]
    return found


def _body(e: AuditEvent, release_namespace: str) -> list[str]:
    if e.resource == "leases":
        return [] if e.namespace == release_namespace else ["a Lease outside the release"]
    if e.resource == "pods":
        return _pod_patch(e.request)
    if e.resource.startswith("mutatingadmissionpolic"):
        return [] if e.name.startswith("schedpolicy-hints-") else ["not a compiled policy"]
    if e.resource == "mutatingwebhookconfigurations":
        # The audit policy keeps no body for it; kube.py patches the chart's own only.
        return [] if e.name == "schedpolicy" else ["not the chart's webhook"]
    if e.resource == "nodes":
        return _node_patch(e.request)
    return []


def _pod_patch(request: Any) -> list[str]:
    """Only JSON Patches guarded by the UID (a whole new annotations map also by the
    resourceVersion it was computed from), setting or removing the cost keys."""
    if not isinstance(request, list):
        return [f"not a JSON Patch: {request!r}"]
    paths = {op.get("path") for op in request}
    problems = [] if "/metadata/uid" in paths else ["no UID test"]
    owned = {_pointer(k) for k in COST_KEYS}
    for op in request:
        path = op.get("path")
        if path in ("/metadata/uid", "/metadata/resourceVersion"):
            if op.get("op") != "test":
                problems.append(f"{op.get('op')} {path}")
        elif path == "/metadata/annotations":
            if op.get("op") != "add" or "/metadata/resourceVersion" not in paths:
                problems.append("a whole annotations map without a resourceVersion test")
            elif not set(op.get("value") or {}) <= set(COST_KEYS):
                problems.append(f"annotations {sorted(op.get('value') or {})}")
        elif path not in owned:
            problems.append(f"{op.get('op')} {path}")
    return problems


def _node_patch(request: Any) -> list[str]:
    """Merge patches of our labels (never a reserved domain) and our ownership annotation,
    guarded by the UID."""
    if not isinstance(request, dict):
        return [f"not a merge patch: {request!r}"]
    meta = request.get("metadata") or {}
    problems = [f"metadata.{k}" for k in set(meta) - {"uid", "labels", "annotations"}]
    if "uid" not in meta:
        problems.append("no UID guard")
    problems += [
        f"label {key}"
        for key in meta.get("labels") or {}
        if is_reserved_label_domain(key.split("/", 1)[0])
    ]
    problems += [
        f"annotation {key}"
        for key in meta.get("annotations") or {}
        if key != OWNED_LABELS_ANNOTATION
    ]
    return problems


def changed_hands(
    events: Iterable[AuditEvent], namespaces: Iterable[str], keys: Iterable[str] = COST_KEYS
) -> dict[str, list[str]]:
    """Per `namespace/pod key`, the writers in turn of a value that passed from one writer to
    another and back (more than two turns); {} when none did."""
    wanted, pointers = set(namespaces), {_pointer(k): k for k in keys}
    turns: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e.resource != "pods" or e.verb != "patch" or e.namespace not in wanted:
            continue
        if not 200 <= e.code < 300:
            continue
        for key in _keys_set(e.request, pointers):
            who = "schedpolicy" if e.user == OPERATOR_USER else e.user
            seq = turns[f"{e.namespace}/{e.name} {key}"]
            if not seq or seq[-1] != who:
                seq.append(who)
    return {k: v for k, v in turns.items() if len(v) > 2}


def _keys_set(request: Any, pointers: Mapping[str, str]) -> set[str]:
    if isinstance(request, list):
        found = {pointers[op["path"]] for op in request if op.get("path") in pointers}
        for op in request:
            if op.get("path") == "/metadata/annotations":
                found |= set(op.get("value") or {}) & set(pointers.values())
        return found
    if isinstance(request, dict):
        annotations = (request.get("metadata") or {}).get("annotations") or {}
        return set(annotations) & set(pointers.values())
    return set()


# ---- writes on objects being deleted, or removed ------------------------------------------
#
# Judged on one clock, the apiserver's: when a request was received and when its answer was
# complete, as the audit log stamps them. An object's deletion has two instants there:
# - deleting: the first accepted deletion request (a DELETE, or a pod's eviction) has
#   completed, so the object carries a deletionTimestamp (or is already removed);
# - removed: the request that removed it has completed. No audit level below
#   RequestResponse says which request that was, but once an object is removed nothing more
#   on it can be accepted, so it is the last accepted request that can remove it: a DELETE,
#   an eviction or, once deletion began, another client's write of the object itself (how a
#   last finalizer goes). A graceless DELETE that loses the race to another one is answered
#   200 as well (KWOK's, beside the ReplicaSet controller's), so this instant may read a few
#   milliseconds late, never early. Whether the object was removed at all is for the
#   caller to say (`removed`, by UID, as a watch saw it): the log cannot tell a pod removed
#   by its DELETE from one still terminating when the run ended.
# A write counts as after an instant when the apiserver received it after that instant's
# request had completed; a write that overlapped it may have landed on either side, and
# counts as before. Writes are keyed by the UID they test. A name reused by a later pod is
# another life: each deletion request goes to the life of the latest UID logged under that
# name (in a write's body, or a binding's objectRef) when it was received.


@dataclass(frozen=True)
class Ending:
    """One object's deletion, as the audit log recorded it (None: it did not happen)."""

    deleting: datetime | None = None
    removed: datetime | None = None


@dataclass
class GoneWrites:
    """The operator's patches of pods and nodes against their objects' deletion. A JSON
    Patch's `test` of the UID fails with 422, a merge patch's `metadata.uid` with 409; an
    object that is no more answers 404."""

    attempts: int = 0  # every patch of a pod or node
    refused_not_found: int = 0  # the apiserver had no such object (404)
    refused_guard: int = 0  # the UID or resourceVersion guard failed (409, 422)
    # Accepted although received after the request that removed the object had completed. A
    # write whose UID test held cannot be (the apiserver would answer 404 or 422): one that
    # is landed on another object of the same name, a real late write. Must be 0.
    succeeded_after_gone: int = 0
    # Accepted on an object already carrying a deletionTimestamp and not yet removed.
    accepted_while_deleting: int = 0
    # Of those, writes that changed anything the operator does not own. Must be 0.
    deleting_beyond_owned: int = 0
    # Objects written to that the watch saw removed with no removing request in the log.
    removal_not_logged: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def to_gone(self) -> int:
        """Writes that reached a removed object: refused by the apiserver, or (never, if the
        guards hold) accepted by it."""
        return self.refused_not_found + self.succeeded_after_gone

    def note(self, e: AuditEvent, what: str, always: bool = False) -> None:
        if always or len(self.examples) < 8:
            self.examples.append(
                f"{e.at.isoformat()} {e.code} {e.resource} {e.namespace}/{e.name} {what}"
            )


def written_uid(e: AuditEvent) -> str:
    """The UID a write was guarded by (a JSON Patch's `test /metadata/uid`, a merge patch's
    `metadata.uid`); "" without one."""
    if isinstance(e.request, list):
        tests = [
            op.get("value")
            for op in e.request
            if isinstance(op, dict) and op.get("op") == "test" and op.get("path") == "/metadata/uid"
        ]
        return str(tests[0]) if tests else ""
    if isinstance(e.request, dict):
        return str((e.request.get("metadata") or {}).get("uid") or "")
    return ""


def _deletes(e: AuditEvent) -> bool:
    """A request that sets an object's deletionTimestamp, or removes it at once."""
    return (e.verb == "delete" and not e.subresource) or (
        e.resource == "pods" and e.subresource == "eviction" and e.verb == "create"
    )


def _writes_object(e: AuditEvent, user: str) -> bool:
    """Another client's write of the object itself: once deletion began, it may drop the
    last finalizer, and so remove it. The operator's own writes never touch finalizers."""
    return e.verb in ("update", "patch") and not e.subresource and e.user != user


def _received(e: AuditEvent) -> datetime:
    return e.received or e.at


def _key(e: AuditEvent) -> tuple[str, str]:
    return e.resource, f"{e.namespace}/{e.name}"


def _uid(e: AuditEvent) -> str:
    """The UID a request names: the one its body tests or carries, or its objectRef's (a
    pod's binding, logged with no body, names the pod's)."""
    return written_uid(e) or e.uid


def _lives(
    events: Iterable[AuditEvent], written: Collection[tuple[str, str]]
) -> dict[tuple[str, str], list[tuple[datetime, str]]]:
    """Per written name, (first received, UID) of each pod or node that held it, in turn."""
    first: dict[tuple[tuple[str, str], str], datetime] = {}
    for e in events:
        uid = _uid(e)
        if uid and _key(e) in written:
            at = first.get((_key(e), uid))
            first[(_key(e), uid)] = _received(e) if at is None else min(at, _received(e))
    lives: dict[tuple[str, str], list[tuple[datetime, str]]] = defaultdict(list)
    for (key, uid), at in sorted(first.items(), key=lambda item: item[1]):
        lives[key].append((at, uid))
    return lives


def _life(lives: Sequence[tuple[datetime, str]], e: AuditEvent) -> str:
    """The UID that held the name when `e` was received (its own, if it names one)."""
    held = [uid for at, uid in lives if at <= _received(e)]
    return _uid(e) or (held[-1] if held else lives[0][1])


def endings(
    events: Iterable[AuditEvent],
    writes: Sequence[AuditEvent],
    removed: Collection[str] | None,
    user: str = OPERATOR_USER,
) -> dict[str, Ending]:
    """Per UID that `writes` tested, its deletion as the log recorded it; `removed`: the UIDs
    that were removed during the run (None: every object whose deletion began)."""
    log = list(events)
    lives = _lives(log, {_key(e) for e in writes})
    requests: dict[str, list[AuditEvent]] = defaultdict(list)
    for e in log:
        if _key(e) in lives and 200 <= e.code < 300 and (_deletes(e) or _writes_object(e, user)):
            requests[_life(lives[_key(e)], e)].append(e)
    out: dict[str, Ending] = {}
    for uid, found in requests.items():
        deletions = [e.at for e in found if _deletes(e)]
        if not deletions:
            continue
        deleting = min(deletions)
        last = max(e.at for e in found if e.at >= deleting)
        gone = removed is None or uid in removed
        out[uid] = Ending(deleting, last if gone else None)
    return out


def writes_to_gone(
    events: Iterable[AuditEvent],
    removed: Collection[str] | None = None,
    user: str = OPERATOR_USER,
) -> GoneWrites:
    """The operator's patches of pods and nodes in `events` (the whole log: other clients'
    deletions are read too), judged against the deletion of the object whose UID each
    tests. `removed`: the UIDs a watch saw removed; only which, never when."""
    log = list(events)
    writes = [
        e
        for e in operator_attempts(log, user)
        if e.resource in ("pods", "nodes") and e.verb == "patch"
    ]
    ends = endings(log, writes, removed, user)
    out = GoneWrites(attempts=len(writes))
    out.removal_not_logged = sum(
        1
        for uid in {written_uid(e) for e in writes} - set(ends)
        if uid and removed is not None and uid in removed
    )
    for e in writes:
        end = ends.get(written_uid(e), Ending())
        if e.code == 404:
            out.refused_not_found += 1
            out.note(e, "refused: not found")
        elif e.code in (409, 422):
            out.refused_guard += 1
        elif not 200 <= e.code < 300:
            continue
        elif end.removed is not None and _received(e) > end.removed:
            out.succeeded_after_gone += 1
            out.note(e, f"ACCEPTED after its removal at {end.removed.isoformat()}", always=True)
        elif end.deleting is not None and _received(e) > end.deleting:
            out.accepted_while_deleting += 1
            if _body(e, ""):
                out.deleting_beyond_owned += 1
            out.note(e, f"accepted while deleting (since {end.deleting.isoformat()})")
    return out
