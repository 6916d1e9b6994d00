"""The informer's handling of watch lines: decode, bookmarks, the end of the initial state,
expiry, and bad input, fed line by line (the e2e tests run it against the apiserver)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schedpolicy.shell import metrics
from schedpolicy.shell.informer import Expired, Informer, Resource, StreamError, by_uid
from schedpolicy.view import wire

PODS = Resource("pods-test", "/api/v1/pods", wire.Pod, by_uid)


class Sink:
    def __init__(self) -> None:
        self.held: dict[str, wire.Pod] = {}
        self.pruned: list[set[str]] = []

    def upsert(self, obj: wire.Pod) -> None:
        if obj.metadata.name == "explodes":
            raise ValueError("a field the core needs is unreadable")
        self.held[obj.metadata.uid] = obj

    def delete(self, obj: wire.Pod) -> None:
        self.held.pop(obj.metadata.uid, None)

    def prune(self, keep: set[str]) -> None:
        self.pruned.append(set(keep))
        for uid in [u for u in self.held if u not in keep]:
            del self.held[uid]


def line(type_: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": type_, "object": obj}).encode()


def pod(uid: str, rv: str, name: str = "p", **extra: Any) -> dict[str, Any]:
    meta = {"uid": uid, "name": name, "namespace": "ns", "resourceVersion": rv, **extra}
    return {"kind": "Pod", "metadata": meta, "spec": {"nodeName": "n1"}}


def bookmark(rv: str, end: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": "Pod", "metadata": meta}


def informer() -> tuple[Informer[wire.Pod], Sink]:
    sink = Sink()
    return Informer(None, PODS, sink), sink


def errors() -> float:
    return float(metrics.WATCH_DECODE_ERRORS.labels(kind=PODS.kind)._value.get())


def test_initial_state_ends_at_its_bookmark_and_prunes_what_it_lacks() -> None:
    inf, sink = informer()
    sink.held["gone"] = wire.Pod()  # held from before a relist; the new state lacks it
    keep: set[str] | None = set()
    for raw in (
        line("ADDED", pod("a", "5")),
        line("ADDED", pod("b", "6")),
        line("BOOKMARK", bookmark("7")),
    ):
        keep = inf._line(raw, keep)
    assert keep == {"a", "b"}, "a bookmark without the annotation does not end the state"
    assert not inf.synced.is_set()
    keep = inf._line(line("BOOKMARK", bookmark("8", end=True)), keep)
    assert keep is None
    assert inf.synced.is_set()
    assert sink.pruned == [{"a", "b"}]
    assert set(sink.held) == {"a", "b"}
    assert inf.resource_version == "8"


def test_events_after_the_initial_state_apply_inline() -> None:
    inf, sink = informer()
    inf._line(line("ADDED", pod("a", "5")), None)
    inf._line(line("MODIFIED", pod("a", "9", labels={"app": "x"})), None)
    assert sink.held["a"].metadata.labels == {"app": "x"}
    inf._line(line("DELETED", pod("a", "10")), None)
    assert sink.held == {}
    assert inf.resource_version == "10"
    assert sink.pruned == [], "only an initial state prunes"


def test_decode_reads_only_declared_fields() -> None:
    inf, sink = informer()
    body = pod("a", "5")
    body["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}] * 50
    body["status"] = {"phase": "Running", "images": ["x"] * 10, "podIP": "10.0.0.1"}
    inf._line(line("ADDED", body), None)
    held = sink.held["a"]
    assert (held.status.phase, held.status.pod_ip, held.spec.node_name) == (
        "Running",
        "10.0.0.1",
        "n1",
    )
    assert not hasattr(held.spec, "volumes")


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"{not json", "not JSON at all"),
        (b'{"type": "ADDED", "object": {"metadata": {"uid": 7}}}', "uid is a number"),
        (b'{"type": "ADDED", "object": {"metadata": {"labels": ["a"]}}}', "labels not a map"),
        (b'{"type": "ADDED", "object": {"metadata": {"name": "no-uid"}}}', "no uid"),
        (line("ADDED", pod("x", "5", name="explodes")), "the sink cannot read it"),
        (b'{"type": "ADDED", "object": "a string"}', "object not an object"),
    ],
)
def test_bad_input_is_counted_and_skipped(raw: bytes, why: str) -> None:
    inf, sink = informer()
    before = errors()
    keep = inf._line(raw, set())
    assert errors() == before + 1, why
    assert keep == set()
    assert sink.held == {}
    # ...and the stream goes on
    inf._line(line("ADDED", pod("a", "6")), None)
    assert "a" in sink.held


def test_an_unreadable_object_still_moves_the_version_on() -> None:
    inf, _ = informer()
    inf._line(
        b'{"type": "MODIFIED", "object": {"metadata": {"resourceVersion": "42", "labels": 1}}}',
        None,
    )
    assert inf.resource_version == "42"


def test_expiry_and_errors_in_the_stream() -> None:
    inf, _ = informer()
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    with pytest.raises(Expired):
        inf._line(line("ERROR", gone), None)
    other = {"kind": "Status", "code": 500, "reason": "InternalError", "message": "boom"}
    with pytest.raises(StreamError, match="500 InternalError: boom"):
        inf._line(line("ERROR", other), None)


class _PlainResponse:
    """What the apiserver sends for a resource it does not serve: text, not a Status."""

    status, reason = 404, "Not Found"

    async def read(self) -> bytes:
        return b"404 page not found\n\xff"


async def test_a_refusal_that_is_not_a_status_is_reported_as_sent() -> None:
    from schedpolicy.shell.informer import _refusal

    err = await _refusal(_PlainResponse())
    assert err.status == 404
    assert "404 page not found" in str(err)
