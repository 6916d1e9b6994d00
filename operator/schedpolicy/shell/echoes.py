"""What each writer has written and the watch has not yet shown: one tracker for all.

A write is remembered with the resourceVersion it produced until the watch delivers that
version or a newer one. Until then the view still shows the object as it was, and a
writer that trusted the view would send the same write again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K")


def version_number(value: str) -> int:
    """resourceVersions are opaque, but the apiserver's are etcd revisions: integers."""
    return int(value) if value.isdigit() else -1


@dataclass(frozen=True, slots=True)
class Written:
    value: str | None  # what was written; None when it was a removal
    resource_version: str


class Echoes(Generic[K]):
    def __init__(self) -> None:
        self._written: dict[K, Written] = {}

    def wrote(self, key: K, version: str, value: str | None, seen_version: str | None) -> None:
        """Remember a write, unless the watch has already shown it (`seen_version`, from
        the view, is as new): the echo can arrive before the response does, and waiting
        for an echo already seen would hold every later write to the object."""
        if seen_version is None or version_number(seen_version) < version_number(version):
            self._written[key] = Written(value, version)

    def seen(self, key: K, version: str) -> Written | None:
        """The write this version of the object shows, forgotten now; None when it shows
        none (nothing pending, or an older version)."""
        written = self._written.get(key)
        if written is None or version_number(version) < version_number(written.resource_version):
            return None
        del self._written[key]
        return written

    def pending(self, key: K) -> Written | None:
        return self._written.get(key)

    def forget(self, key: K) -> None:
        self._written.pop(key, None)

    def clear(self) -> None:
        self._written.clear()
