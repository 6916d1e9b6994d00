"""Where the benchmarks' public traces are: the project's `shared/data/` next to a checkout,
found from the checkout upward, so that a clone one directory deeper (a CI workspace, a
worktree) finds them too; or where an environment variable says. A trace is read only with
its SOURCE.md beside it: where it came from, under which licence, and how it was derived."""

from __future__ import annotations

import os
from pathlib import Path

from localcluster.binaries import REPO


def shared_data(relative: str, env: str) -> Path:
    """`$env` if set; else the first `shared/data/<relative>` in the checkout's parent or
    above it; else where it would be beside the checkout, so that the error names that."""
    if os.environ.get(env):
        return Path(os.environ[env])
    for parent in REPO.parents:
        candidate = parent / "shared" / "data" / relative
        if candidate.exists():
            return candidate
    return REPO.parent / "shared" / "data" / relative


SOURCE = "SOURCE.md"


class MissingSource(ValueError):
    """A trace without its SOURCE.md; the message names the file that is missing."""


def require_source(trace: Path) -> Path:
    """`trace`'s SOURCE.md, or the refusal that names where it should be."""
    source = trace.parent / SOURCE
    if not source.is_file():
        raise MissingSource(
            f"{source}: missing: {trace.name} is read only with its SOURCE.md beside it"
            " (origin, licence, how it was derived)"
        )
    return source
