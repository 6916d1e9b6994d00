"""Who may read /metrics: the reviews built, and their answers read."""

from __future__ import annotations

from typing import Any

import pytest

from schedpolicy.core import access
from schedpolicy.shell.secure_metrics import Gate

ALICE = access.User("system:serviceaccount:monitoring:prometheus", "u1", ("system:authenticated",))


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("Bearer ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("abc", None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert access.bearer_token(header) == token


@pytest.mark.parametrize(
    ("status", "expect"),
    [
        (
            {"authenticated": False, "error": "token expired"},
            access.Verdict(401, "unauthenticated: token expired"),
        ),
        ({}, access.Verdict(401, "unauthenticated: the token is not valid")),
        (
            {
                "authenticated": True,
                "user": {"username": ALICE.name, "uid": "u1", "groups": list(ALICE.groups)},
            },
            ALICE,
        ),
        (
            {"authenticated": True, "user": {"username": "bob", "extra": {"b": ["2"], "a": ["1"]}}},
            access.User("bob", extra=(("a", ("1",)), ("b", ("2",)))),
        ),
    ],
)
def test_authenticated(status: dict[str, Any], expect: object) -> None:
    assert access.authenticated({"status": status}) == expect


def test_the_access_review_carries_the_whole_user() -> None:
    user = access.User("bob", "u2", ("g",), (("scopes", ("s",)),))
    spec = access.access_review(user, "/metrics")["spec"]
    assert spec == {
        "user": "bob",
        "uid": "u2",
        "groups": ["g"],
        "extra": {"scopes": ["s"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


@pytest.mark.parametrize(
    ("status", "code", "reason_part"),
    [
        ({"allowed": True}, 200, "may get /metrics"),
        ({"allowed": True, "denied": True}, 403, "may not get /metrics"),
        ({"allowed": False}, 403, "no RBAC rule allows it"),
        ({"allowed": False, "reason": "denied by webhook"}, 403, "denied by webhook"),
    ],
)
def test_authorized(status: dict[str, Any], code: int, reason_part: str) -> None:
    verdict = access.authorized(ALICE, {"status": status}, "/metrics")
    assert verdict.status == code
    assert reason_part in verdict.reason


class _Reviews:
    """The apiserver's answers, counted; the Gate's caching is what is under test."""

    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed
        self.calls: list[str] = []

    async def review(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(kind)
        if kind == "tokenreviews":
            ok = body["spec"]["token"] == "good"
            user = {"username": ALICE.name, "uid": "u1"}
            return {"status": {"authenticated": ok, "user": user}}
        return {"status": {"allowed": self.allowed}}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_gate_reviews_once_then_caches_until_the_ttl() -> None:
    reviews, clock = _Reviews(allowed=True), _Clock()
    gate = Gate(reviews, clock)
    assert (await gate.check("Bearer good")).status == 200
    assert (await gate.check("Bearer good")).status == 200
    assert reviews.calls == ["tokenreviews", "subjectaccessreviews"]
    clock.now = 61.0  # the token's answer expired, the allow has not
    assert (await gate.check("Bearer good")).status == 200
    assert reviews.calls == ["tokenreviews", "subjectaccessreviews", "tokenreviews"]


async def test_the_gate_refuses_without_asking_when_there_is_no_token() -> None:
    reviews = _Reviews(allowed=True)
    gate = Gate(reviews)
    assert (await gate.check(None)).status == 401
    assert (await gate.check("Bearer bad")).status == 401
    assert reviews.calls == ["tokenreviews"]


async def test_a_deny_is_remembered_for_less_time_than_an_allow() -> None:
    reviews, clock = _Reviews(allowed=False), _Clock()
    gate = Gate(reviews, clock)
    assert (await gate.check("Bearer good")).status == 403
    reviews.allowed = True
    clock.now = 31.0
    assert (await gate.check("Bearer good")).status == 200
    assert reviews.calls.count("subjectaccessreviews") == 2
