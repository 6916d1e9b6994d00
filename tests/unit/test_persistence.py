"""Kopf's bookkeeping may land on SchedulingPolicies, never on Pods or Nodes."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from schedpolicy.shell.persistence import OwnResourceDiffBaseStorage, OwnResourceProgressStorage

POLICY = {
    "apiVersion": "schedpolicy.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {"name": "p"},
}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
RECORD = kopf.ProgressRecord(started="2026-01-01T00:00:00", retries=1, success=False, failure=False)


def _progress() -> OwnResourceProgressStorage:
    return OwnResourceProgressStorage(kopf.AnnotationsProgressStorage(prefix="schedpolicy.io"))


@pytest.mark.parametrize(("raw", "writes"), [(POLICY, True), (POD, False), (NODE, False)])
def test_progress_is_stored_only_on_own_resources(raw: dict[str, Any], writes: bool) -> None:
    storage, body, patch = _progress(), kopf.Body(raw), kopf.Patch()

    storage.store(key=kopf.HandlerId("h"), record=RECORD, body=body, patch=patch)
    storage.touch(body=body, patch=patch, value="x")

    assert bool(patch) is writes


@pytest.mark.parametrize(("raw", "writes"), [(POLICY, True), (POD, False), (NODE, False)])
def test_diffbase_is_stored_only_on_own_resources(raw: dict[str, Any], writes: bool) -> None:
    storage = OwnResourceDiffBaseStorage(kopf.AnnotationsDiffBaseStorage(prefix="schedpolicy.io"))
    body, patch = kopf.Body(raw), kopf.Patch()

    storage.store(body=body, patch=patch, essence=storage.build(body=body))

    assert bool(patch) is writes


def test_progress_on_a_pod_reads_as_absent_even_if_annotated() -> None:
    storage = _progress()
    pod = {
        **POD,
        "metadata": {**POD["metadata"], "annotations": {"schedpolicy.io/h": '{"retries": 3}'}},
    }
    assert storage.fetch(key=kopf.HandlerId("h"), body=kopf.Body(pod)) is None
