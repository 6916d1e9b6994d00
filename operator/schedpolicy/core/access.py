"""Who may read `/metrics`: the decision behind the authenticated metrics endpoints.

The endpoints follow controller-runtime's `filters.WithAuthenticationAndAuthorization`:
the caller's bearer token is checked with a TokenReview, and the user it names with a
SubjectAccessReview for the verb and the non-resource URL. Both reviews are the
apiserver's; this module only builds them and reads their answers, so each step can say
why a scrape was refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class User:
    """Who a TokenReview says the token belongs to."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Verdict:
    """An HTTP status for the scrape and the reason, for the log and the response body."""

    status: int
    reason: str

    @property
    def allowed(self) -> bool:
        return self.status == 200


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def token_review(token: str) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }


def authenticated(review: Mapping[str, Any]) -> User | Verdict:
    """The user a TokenReview answer names, or the 401 it amounts to."""
    status = review.get("status") or {}
    if not status.get("authenticated"):
        why = status.get("error") or "the token is not valid"
        return Verdict(401, f"unauthenticated: {why}")
    user = status.get("user") or {}
    extra = user.get("extra") or {}
    return User(
        name=str(user.get("username", "")),
        uid=str(user.get("uid", "")),
        groups=tuple(user.get("groups") or ()),
        extra=tuple(sorted((k, tuple(v or ())) for k, v in extra.items())),
    )


def access_review(user: User, path: str, verb: str = "get") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "user": user.name,
        "groups": list(user.groups),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": spec,
    }


def authorized(user: User, review: Mapping[str, Any], path: str, verb: str = "get") -> Verdict:
    """What a SubjectAccessReview answer means for this user's scrape."""
    status = review.get("status") or {}
    if status.get("allowed") and not status.get("denied"):
        return Verdict(200, f"{user.name} may {verb} {path}")
    why = status.get("reason") or status.get("evaluationError") or "no RBAC rule allows it"
    return Verdict(403, f'forbidden: user "{user.name}" may not {verb} {path}: {why}')
