"""How counts read in the messages people see (status, Events, explain). Pure."""

from __future__ import annotations


def count(n: int, singular: str, plural: str | None = None) -> str:
    """`1 pod`, `3 pods`; `plural` for nouns that do not just take an s."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def verb(n: int, singular: str, plural: str) -> str:
    """The verb that agrees with `n` things: `has`/`have`, `is`/`are`."""
    return singular if n == 1 else plural


def pending_message(reason: str, pods: list[str], scheduler: str, limit: int) -> str:
    """The Degraded message for pods a policy hands to a scheduler that does not place them."""
    n = len(pods)
    example = ", ".join(sorted(pods)[:3])
    if reason == "SchedulerNotScheduling":
        return (
            f"{count(n, 'pod')} {verb(n, 'has', 'have')} waited over {limit}s for {scheduler},"
            f" which has not tried to schedule {verb(n, 'it', 'them')} ({example}); is the"
            " secondary scheduler running?"
        )
    return (
        f"{count(n, 'pod')} {verb(n, 'is', 'are')} unschedulable on {scheduler} for over"
        f" {limit}s ({example})"
    )
