"""What the operator wrote, judged from the apiserver's audit log. Pure over AuditEvents.

Three questions, asked by the e2e aftermath and by B7's whole-run audit under Karpenter:
- `unowned_writes`: did any accepted write touch something the operator does not own?
- `changed_hands`: did a deletion cost pass from one writer to another and back?
- `writes_to_gone`: how many writes went to a pod or node that was already gone, and did any
  of them change anything?
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
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


@dataclass
class GoneWrites:
    """The operator's writes to pods and nodes, and those that arrived after the object was
    gone. A JSON Patch's `test` of the UID fails with 422, a merge patch's `metadata.uid`
    with 409; an object that is no more answers 404."""

    attempts: int = 0  # every patch of a pod or node
    refused_not_found: int = 0  # the apiserver had no such object (404)
    refused_guard: int = 0  # the UID or resourceVersion guard failed (409, 422)
    succeeded_after_gone: int = 0  # accepted although a watch had seen the object go
    examples: list[str] = field(default_factory=list)

    @property
    def to_gone(self) -> int:
        """Writes that reached a gone object: refused by the apiserver, or (never, if the
        guards hold) accepted by it."""
        return self.refused_not_found + self.succeeded_after_gone


def writes_to_gone(
    attempts: Iterable[AuditEvent], gone: Mapping[tuple[str, str], datetime]
) -> GoneWrites:
    """`gone`: (resource, namespace/name) -> when a watch saw the object deleted. A write
    counts as after it when the apiserver received it later: the audit log stamps an answer
    when it is complete, which may be after a deletion that followed the write."""
    out = GoneWrites()
    for e in attempts:
        if e.resource not in ("pods", "nodes") or e.verb != "patch":
            continue
        out.attempts += 1
        ended = gone.get((e.resource, f"{e.namespace}/{e.name}"))
        if e.code == 404:
            out.refused_not_found += 1
        elif e.code in (409, 422):
            out.refused_guard += 1
            continue
        elif 200 <= e.code < 300 and ended is not None and ended < (e.received or e.at):
            out.succeeded_after_gone += 1
        else:
            continue
        if len(out.examples) < 5:
            out.examples.append(f"{e.at.isoformat()} {e.code} {e.resource} {e.namespace}/{e.name}")
    return out
