"""Kopf persistence that never touches Pods or Nodes.

Kopf keeps handler progress and a diff base on every object that a
create/update/resume handler sees, as `kopf.zalando.org/*` annotations. We own
SchedulingPolicy objects, so that bookkeeping is welcome there; on Pods and
Nodes it would be a write to every object in the cluster. These wrappers pass
through only for our own API group, so even a handler registered by mistake on
Pods or Nodes cannot make kopf write its annotations there.
"""

from __future__ import annotations

from typing import Any

import kopf

from schedpolicy.core import api


def is_own_resource(body: kopf.Body) -> bool:
    api_version = str(body.get("apiVersion", ""))
    return api_version.split("/", 1)[0] == api.GROUP


class OwnResourceProgressStorage(kopf.ProgressStorage):
    """Delegates to `inner` for our own resources; stores nothing for any other kind."""

    def __init__(self, inner: kopf.ProgressStorage) -> None:
        super().__init__()
        self.inner = inner

    def fetch(self, *, key: kopf.HandlerId, body: kopf.Body) -> kopf.ProgressRecord | None:
        return self.inner.fetch(key=key, body=body) if is_own_resource(body) else None

    def store(
        self,
        *,
        key: kopf.HandlerId,
        record: kopf.ProgressRecord,
        body: kopf.Body,
        patch: kopf.Patch,
    ) -> None:
        if is_own_resource(body):
            self.inner.store(key=key, record=record, body=body, patch=patch)

    def purge(self, *, key: kopf.HandlerId, body: kopf.Body, patch: kopf.Patch) -> None:
        if is_own_resource(body):
            self.inner.purge(key=key, body=body, patch=patch)

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        if is_own_resource(body):
            self.inner.touch(body=body, patch=patch, value=value)

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return self.inner.clear(essence=essence)

    def flush(self) -> None:
        self.inner.flush()


class OwnResourceDiffBaseStorage(kopf.DiffBaseStorage):
    """Delegates to `inner` for our own resources; keeps no diff base on any other kind."""

    def __init__(self, inner: kopf.DiffBaseStorage) -> None:
        super().__init__()
        self.inner = inner

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        # Kopf builds an essence (a deep copy of the object) on every event to detect
        # changes for change handlers; Pods and Nodes have none, so skip the copy.
        if not is_own_resource(body):
            return kopf.BodyEssence()
        return self.inner.build(body=body, extra_fields=extra_fields)

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return self.inner.fetch(body=body) if is_own_resource(body) else None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        if is_own_resource(body):
            self.inner.store(body=body, patch=patch, essence=essence)
