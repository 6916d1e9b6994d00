"""Which admission path serves each placement policy, and what the leader writes for it. Pure.

A policy is served by its MutatingAdmissionPolicy only once the apiserver holds the
compiled version of its current spec (policy and binding, by digest). Until then, and
whenever it cannot be compiled or the apiserver refused it, the webhook serves it. The
webhook configuration's match condition is narrowed to the pods those webhook-served
policies may select, so a pod that only compiled policies select never leaves the
apiserver.

A match condition sees the pod, not its namespace, so the condition is the union of the
webhook-served policies' pod selectors: it may call the webhook for a pod that a
namespace selector then rules out, never the other way round.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from schedpolicy.core import timestamps
from schedpolicy.core.placement.cel import selector_cel
from schedpolicy.core.placement.compiler import DIGEST_ANNOTATION, Compiled, Inexpressible
from schedpolicy.core.policy.matching import Policy

Mode = Literal["webhook", "policy"]
Path = Literal["MutatingAdmissionPolicy", "Webhook"]

# The name of our entry among the webhook's matchConditions; others are left as they are.
MATCH_CONDITION = "schedpolicy-webhook-served"
_LABELS = "object.metadata.?labels.orValue({})"


RouteReason = Literal[
    "Compiled", "WebhookMode", "NotServed", "Inexpressible", "Rejected", "Pending"
]


@dataclass(frozen=True)
class Route:
    path: Path
    reason: RouteReason
    message: str
    object: str | None = None  # the MutatingAdmissionPolicy, when it serves the policy

    @property
    def compiled(self) -> bool:
        return self.path == "MutatingAdmissionPolicy"


@dataclass(frozen=True)
class Stored:
    """The compiled digests the apiserver holds, by object name (ours only, by label)."""

    policies: Mapping[str, str]
    bindings: Mapping[str, str]

    def holds(self, compiled: Compiled) -> bool:
        return (
            self.policies.get(compiled.name) == compiled.digest
            and self.bindings.get(compiled.name) == compiled.digest
        )


def owned_by(compiled: Compiled, owner: Mapping[str, str]) -> Compiled:
    """The compiled objects owned by `owner` (the chart's webhook configuration) instead of
    the policy: `helm uninstall` then takes them with it, and no pod is left pointed at a
    scheduler that is gone. The controller removes them itself when their policy goes."""
    ref = {**owner, "controller": True}
    digest = hashlib.sha256(f"{compiled.digest}/{owner.get('uid')}".encode()).hexdigest()[:16]

    def owned(doc: Mapping[str, object]) -> dict[str, object]:
        meta = dict(doc["metadata"])  # type: ignore[call-overload]
        meta["ownerReferences"] = [ref]
        meta["annotations"] = {**meta.get("annotations", {}), DIGEST_ANNOTATION: digest}
        return {**doc, "metadata": meta}

    return replace(
        compiled, body=owned(compiled.body), binding=owned(compiled.binding), digest=digest
    )


@dataclass(frozen=True)
class SyncPlan:
    apply: tuple[Compiled, ...]  # missing, or stored with another digest
    delete: tuple[str, ...]  # ours, and no compiled policy wants them


def plan_sync(
    outcomes: Mapping[str, Compiled | Inexpressible], stored: Stored, mode: Mode
) -> SyncPlan:
    wanted = (
        {o.name: o for o in outcomes.values() if isinstance(o, Compiled)}
        if mode == "policy"
        else {}
    )
    apply = tuple(c for _, c in sorted(wanted.items()) if not stored.holds(c))
    ours = set(stored.policies) | set(stored.bindings)
    return SyncPlan(apply, tuple(sorted(ours - set(wanted))))


def route(
    outcome: Compiled | Inexpressible,
    *,
    mode: Mode,
    served: bool,
    stored: Stored,
    refused: Mapping[str, str],
) -> Route:
    """`served`: the apiserver serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy.
    `refused`: the apiserver's message, by policy, for a compiled object it did not take."""
    if mode == "webhook":
        return Route("Webhook", "WebhookMode", "admission mode is webhook")
    if not served:
        return Route(
            "Webhook",
            "NotServed",
            "the apiserver does not serve admissionregistration.k8s.io/v1"
            " MutatingAdmissionPolicy; the webhook serves this policy",
        )
    if isinstance(outcome, Inexpressible):
        return Route("Webhook", "Inexpressible", outcome.message)
    if outcome.policy in refused:
        return Route(
            "Webhook",
            "Rejected",
            f"the apiserver refused MutatingAdmissionPolicy {outcome.name}:"
            f" {refused[outcome.policy]}; the webhook serves this policy",
        )
    if stored.holds(outcome):
        return Route(
            "MutatingAdmissionPolicy",
            "Compiled",
            f"served in the apiserver by MutatingAdmissionPolicy {outcome.name}"
            f" (digest {outcome.digest})",
            outcome.name,
        )
    return Route(
        "Webhook",
        "Pending",
        f"MutatingAdmissionPolicy {outcome.name} is not written yet; the webhook serves"
        " this policy meanwhile",
    )


def routes(
    outcomes: Mapping[str, Compiled | Inexpressible],
    *,
    mode: Mode,
    served: bool,
    stored: Stored,
    refused: Mapping[str, str],
) -> dict[str, Route]:
    return {
        name: route(o, mode=mode, served=served, stored=stored, refused=refused)
        for name, o in outcomes.items()
    }


def webhook_condition(
    policies: Iterable[Policy],
    by_policy: Mapping[str, Route],
    settling: Collection[str] = (),
) -> str | None:
    """The CEL of our webhook match condition, or None when every pod must be sent (a
    webhook-served policy selects pods by namespace only, or none is compiled).

    `settling`: policies whose MutatingAdmissionPolicy was written a moment ago. The
    apiserver loads it from its own watch, so the webhook keeps their pods a little longer
    (both paths are idempotent, so a pod served twice gets the hints once)."""
    placing = [p for p in policies if p.spec.placement is not None]
    if not any(r.compiled for r in by_policy.values()) or not placing:
        # Nothing is compiled (webhook mode, an older apiserver, or no placement policy
        # yet): the webhook sees every pod, so that a new policy takes effect as soon as
        # the webhook has read it.
        return None
    parts: list[str] = []
    for policy in sorted(placing, key=lambda p: p.name):
        served = by_policy.get(policy.name)
        if served is not None and served.compiled and policy.name not in settling:
            continue
        cel = selector_cel(policy.spec.pod_selector, _LABELS)
        if cel == "true":
            return None
        parts.append(f"({cel})")
    return " || ".join(parts) if parts else "false"


def match_conditions(
    current: Iterable[Mapping[str, str]], expression: str | None
) -> list[dict[str, str]]:
    """The webhook's matchConditions with ours set to `expression` (or removed)."""
    kept = [dict(c) for c in current if c.get("name") != MATCH_CONDITION]
    if expression is not None:
        kept.append({"name": MATCH_CONDITION, "expression": expression})
    return kept


def hinted_by(status: Mapping[str, Any], created: str) -> dict[str, str]:
    """The admission path that hinted a pod created at `created` (RFC 3339), as far as the
    hinting policy's status tells: its Compiled condition and when that last turned."""
    found = {c.get("type"): c for c in status.get("conditions") or []}.get("Compiled")
    if found is None:
        return {"path": "Webhook", "why": "the policy has no Compiled condition"}
    since = str(found.get("lastTransitionTime") or "")
    if found.get("status") == "True":
        if since and timestamps.parse(since) <= timestamps.parse(created):
            name = (status.get("admission") or {}).get("policyObject", "")
            return {"path": "MutatingAdmissionPolicy", "why": f"{name}, compiled since {since}"}
        return {"path": "Webhook", "why": f"created before the policy was compiled ({since})"}
    if since and timestamps.parse(since) > timestamps.parse(created):
        return {"path": "unknown", "why": f"the policy's path changed after ({since})"}
    return {"path": "Webhook", "why": f"{found.get('reason')}: {found.get('message')}"}
