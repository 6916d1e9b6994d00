"""What a refusal from the API server means to a writer: typed errors, mapped from the HTTP
status in one place (kube.py raises them), so the writers react to what happened rather than
to status codes."""

from __future__ import annotations


class KubeError(Exception):
    """The API server refused a request, or could not be reached (status 0)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}" if status else reason)
        self.status = status
        self.reason = reason


class Gone(KubeError):
    """404: the object does not exist (any more)."""


class PreconditionFailed(KubeError):
    """The guard failed: the name belongs to another object now (UID), or the object moved
    under us (value or resourceVersion). Nothing was written. A merge patch's UID
    precondition fails with 409; a JSON Patch `test` fails with 422."""


class Transient(KubeError):
    """429, 5xx or no connection: nothing was written, and trying again later may work."""


class Forbidden(KubeError):
    """401 or 403: these credentials may not do this. RBAC can change, and an apiserver
    refuses for a moment while its authorizer warms up."""


class Refused(KubeError):
    """Any other refusal (400, 405, 413, ...): it will not pass as it is."""


def classify(
    status: int, reason: str, preconditions: frozenset[int] = frozenset({409})
) -> KubeError:
    """`preconditions`: the statuses that mean "the guard failed" for this request."""
    if status == 404:
        return Gone(status, reason)
    if status in preconditions:
        return PreconditionFailed(status, reason)
    if status == 429 or status >= 500:
        return Transient(status, reason)
    if status in (401, 403):
        return Forbidden(status, reason)
    return Refused(status, reason)
