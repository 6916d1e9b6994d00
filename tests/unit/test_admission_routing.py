"""Which admission path serves a policy, what the leader writes, and the webhook's
match condition: tables over core/admission_routing.py."""

from __future__ import annotations

from typing import Any

import pytest

from schedpolicy.core.api import SchedulingPolicySpec
from schedpolicy.core.placement import compiler as ap
from schedpolicy.core.placement import routing
from schedpolicy.core.placement.routing import Route, Stored
from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.policy.status import Observation, desired_status, summary


def policy(name: str, **spec: Any) -> Policy:
    body = {"priority": 0, "placement": {}, **spec}
    return Policy(name, SchedulingPolicySpec.model_validate(body), uid=f"uid-{name}")


def compiled(name: str) -> ap.Compiled:
    outcome = ap.compile_policy(
        policy(name), [policy(name)], instance_types=(), excluded_namespaces=()
    )
    assert isinstance(outcome, ap.Compiled)
    return outcome


A = compiled("a")
NOPE = ap.Inexpressible("b", "instanceTypes", "too many")
HELD = Stored({A.name: A.digest}, {A.name: A.digest})
STALE = Stored({A.name: "old"}, {A.name: A.digest})
NONE = Stored({}, {})


@pytest.mark.parametrize(
    ("outcome", "mode", "served", "stored", "refused", "path", "reason"),
    [
        (A, "webhook", True, HELD, {}, "Webhook", "WebhookMode"),
        (A, "policy", False, NONE, {}, "Webhook", "NotServed"),
        (NOPE, "policy", True, NONE, {}, "Webhook", "Inexpressible"),
        (A, "policy", True, NONE, {"a": "spec.variables[0]: bad"}, "Webhook", "Rejected"),
        (A, "policy", True, HELD, {}, "MutatingAdmissionPolicy", "Compiled"),
        # An older digest, or a binding not written yet, does not serve the current spec.
        (A, "policy", True, STALE, {}, "Webhook", "Pending"),
        (A, "policy", True, Stored({A.name: A.digest}, {}), {}, "Webhook", "Pending"),
    ],
)
def test_route(
    outcome: ap.Compiled | ap.Inexpressible,
    mode: routing.Mode,
    served: bool,
    stored: Stored,
    refused: dict[str, str],
    path: str,
    reason: str,
) -> None:
    got = routing.route(outcome, mode=mode, served=served, stored=stored, refused=refused)
    assert (got.path, got.reason) == (path, reason)
    assert got.compiled == (path == "MutatingAdmissionPolicy")
    if reason == "Rejected":
        assert "spec.variables[0]: bad" in got.message
        assert "webhook serves" in got.message
    if reason == "Inexpressible":
        assert got.message.startswith("instanceTypes: too many")


@pytest.mark.parametrize(
    ("mode", "stored", "apply", "delete"),
    [
        ("policy", NONE, [A.name], []),
        ("policy", HELD, [], []),
        ("policy", STALE, [A.name], []),
        # Ours without a policy that compiles to them go; so does everything in webhook mode.
        ("policy", Stored({**HELD.policies, "schedpolicy-hints-x": "d"}, HELD.bindings), [], ["x"]),
        ("webhook", HELD, [], ["a"]),
    ],
)
def test_plan_sync(mode: routing.Mode, stored: Stored, apply: list[str], delete: list[str]) -> None:
    plan = routing.plan_sync({"a": A, "b": NOPE}, stored, mode)
    assert [c.name for c in plan.apply] == apply
    assert list(plan.delete) == [ap.NAME_PREFIX + d for d in delete]


ON_MAP = Route("MutatingAdmissionPolicy", "Compiled", "", "x")
ON_HOOK = Route("Webhook", "Inexpressible", "")


@pytest.mark.parametrize(
    ("policies", "routes", "expression"),
    [
        ([policy("a")], {"a": ON_MAP}, "false"),
        # A webhook-served policy without a pod selector: every pod goes to the webhook.
        ([policy("a")], {"a": ON_HOOK}, None),
        ([policy("a")], {}, None),
        (
            [policy("a", podSelector={"matchLabels": {"app": "web"}}), policy("c")],
            {"a": ON_HOOK, "c": ON_MAP},
            "(object.metadata.?labels.orValue({})[?'app'] == optional.of('web'))",
        ),
        # Nothing compiled, or nothing to place: every pod goes, so a new policy is served
        # as soon as the webhook reads it.
        (
            [Policy("n", SchedulingPolicySpec.model_validate({"nodeLabels": {"gpu": {}}}))],
            {},
            None,
        ),
        ([policy("a"), policy("b")], {"a": ON_HOOK, "b": ON_HOOK}, None),
    ],
)
def test_webhook_condition(
    policies: list[Policy], routes: dict[str, Route], expression: str | None
) -> None:
    assert routing.webhook_condition(policies, routes) == expression


def test_match_conditions_keep_others_and_replace_ours() -> None:
    theirs = {"name": "theirs", "expression": "true"}
    ours = {"name": routing.MATCH_CONDITION, "expression": "old"}
    assert routing.match_conditions([theirs, ours], "false") == [
        theirs,
        {"name": routing.MATCH_CONDITION, "expression": "false"},
    ]
    assert routing.match_conditions([theirs, ours], None) == [theirs]


@pytest.mark.parametrize(
    ("route", "status", "problem"),
    [
        (Route("MutatingAdmissionPolicy", "Compiled", "served", "m"), "True", False),
        (Route("Webhook", "WebhookMode", "mode"), "False", False),
        (Route("Webhook", "Rejected", "the apiserver refused it"), "False", True),
    ],
)
def test_status_shows_the_path(route: Route, status: str, problem: bool) -> None:
    out = desired_status(Observation("a", 3, admission=route), None, "2026-12-04T00:00:00Z")
    cond = next(c for c in out["conditions"] if c["type"] == "Compiled")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        status,
        route.reason,
        route.message,
    )
    assert out["admission"]["path"] == route.path
    assert out["admission"].get("policyObject") == route.object
    assert (summary(Observation("a", 3).counts, out["conditions"])["reason"] == "Rejected") == (
        problem
    )


def test_no_compiled_condition_without_a_route() -> None:
    out = desired_status(Observation("a", 1), None, "2026-12-04T00:00:00Z")
    assert [c["type"] for c in out["conditions"]] == ["Ready", "Conflicting", "Degraded"]
    assert "admission" not in out


def compiled_status(status: str, since: str, reason: str = "Compiled") -> dict[str, Any]:
    cond = {"type": "Compiled", "status": status, "reason": reason, "lastTransitionTime": since}
    return {"conditions": [cond], "admission": {"policyObject": "schedpolicy-hints-a"}}


@pytest.mark.parametrize(
    ("status", "path"),
    [
        (compiled_status("True", "2026-12-04T00:00:00Z"), "MutatingAdmissionPolicy"),
        (compiled_status("True", "2026-12-04T02:00:00Z"), "Webhook"),
        (compiled_status("False", "2026-12-04T00:00:00Z", "Inexpressible"), "Webhook"),
        # It left the compiled path after the pod was made: the status cannot tell.
        (compiled_status("False", "2026-12-04T02:00:00Z", "Rejected"), "unknown"),
        ({}, "Webhook"),
    ],
)
def test_hinted_by(status: dict[str, Any], path: str) -> None:
    got = routing.hinted_by(status, "2026-12-04T01:00:00Z")
    assert got["path"] == path
    if path == "MutatingAdmissionPolicy":
        assert "schedpolicy-hints-a" in got["why"]


def test_owned_by_the_webhook_configuration() -> None:
    owner = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "X", "name": "s", "uid": "u1"}
    owned = routing.owned_by(A, owner)
    for doc in (owned.body, owned.binding):
        assert doc["metadata"]["ownerReferences"] == [{**owner, "controller": True}]
        assert doc["metadata"]["annotations"][ap.DIGEST_ANNOTATION] == owned.digest
    # Another owner is another digest: a recreated configuration gets its objects rewritten.
    assert owned.digest != A.digest
    assert routing.owned_by(A, {**owner, "uid": "u2"}).digest != owned.digest
    assert owned.body["spec"] == A.body["spec"]
