"""A streaming informer: one kind's objects, kept current in a sink, for a large cluster.

It starts with the watch-list protocol: one watch that first sends every existing object
and then a bookmark annotated `k8s.io/initial-events-end`, so the initial state is never
held as one big list, by the apiserver or by us. An apiserver that refuses it (older, or
with the WatchList gate off) gets a paged LIST and then a watch from the list's version.

Each line is decoded with msgspec straight into the kind's wire shape and handed to the
sink inline: there is no task or queue per object. Bookmarks keep the resourceVersion
fresh; a 410 Gone starts the initial state over, and the sink then drops what it holds
that the new state lacks (deletions the gap hid). Errors back off, capped.

The informer only reads. Whatever it learns goes to the sink, which owns the view.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import msgspec

from schedpolicy.shell import metrics
from schedpolicy.shell.kube import Kube
from schedpolicy.view import wire

log = logging.getLogger("schedpolicy.informer")

T = TypeVar("T", bound=msgspec.Struct)
T_contra = TypeVar("T_contra", bound=msgspec.Struct, contravariant=True)

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
JSON = "application/json"
PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


class Sink(Protocol[T_contra]):
    def upsert(self, obj: T_contra) -> None: ...

    def delete(self, obj: T_contra) -> None: ...

    def prune(self, keep: set[str]) -> None:
        """Drop every held object whose key is not in `keep`: they went while we looked away."""


@dataclass(frozen=True)
class Resource(Generic[T]):
    kind: str  # for logs and metric labels: "pods"
    path: str  # the collection: "/api/v1/pods"
    shape: type[T]
    key: Callable[[T], str]  # what the sink keys the object by (a UID or a name)
    metadata_only: bool = False  # read as PartialObjectMetadata


def by_uid(obj: Any) -> str:
    """Every wire shape has `metadata`: the key of an object the sink holds by UID."""
    return str(obj.metadata.uid)


def by_name(obj: Any) -> str:
    return str(obj.metadata.name)


class Expired(Exception):
    """410 Gone: the version we hold is older than the apiserver keeps."""


class Refused(Exception):
    """The apiserver does not serve this way of asking (watch-list, here)."""


class StreamError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status


_STATUS = msgspec.json.Decoder(wire.Status)
_EVENT = msgspec.json.Decoder(wire.Event)
_META = msgspec.json.Decoder(wire.Metadata)
_VERSION = msgspec.json.Decoder(wire.Versioned)


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The response body split at newlines, whatever the chunking (no line-length limit)."""
    pending = b""
    async for chunk in response.content.iter_any():
        pending = pending + chunk if pending else chunk
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            if end > start:
                yield pending[start:end]
            start = end + 1
        pending = pending[start:]
    if pending.strip():
        yield pending


async def _refusal(response: aiohttp.ClientResponse) -> StreamError:
    body = await response.read()
    try:
        status = _STATUS.decode(body)
    except msgspec.DecodeError:
        status = wire.Status(
            response.status, response.reason or "", body[:200].decode(errors="replace")
        )
    return StreamError(response.status, status.reason, status.message)


class Informer(Generic[T]):
    def __init__(
        self,
        kube: Kube,
        resource: Resource[T],
        sink: Sink[T],
        *,
        timeout_seconds: int = 300,
        page: int = 500,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        self.kube, self.resource, self.sink = kube, resource, sink
        self.timeout_seconds, self.page = timeout_seconds, page
        self.backoff = backoff
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.watch_list = True  # False once the apiserver has refused it
        self.decode_errors = 0
        self._objects = msgspec.json.Decoder(resource.shape)
        self._list = msgspec.json.Decoder(wire.List[resource.shape])  # type: ignore[name-defined]
        self._errors = metrics.WATCH_DECODE_ERRORS.labels(kind=resource.kind)
        self._events = {
            t: metrics.WATCH_EVENTS.labels(kind=resource.kind, type=t)
            for t in ("ADDED", "MODIFIED", "DELETED")
        }

    # -- the loop

    async def run(self) -> None:
        delay = self.backoff[0]
        while True:
            try:
                if not self.resource_version:
                    if self.watch_list:
                        await self._stream(initial=True)
                    else:
                        await self._list_all()
                if self.resource_version:
                    await self._stream(initial=False)
                metrics.WATCH_RESTARTS.labels(kind=self.resource.kind, reason="closed").inc()
                delay = self.backoff[0]
            except asyncio.CancelledError:
                raise
            except Expired:
                log.info(
                    "%s: resourceVersion %s expired; relisting",
                    self.resource.kind,
                    self.resource_version,
                )
                metrics.WATCH_RESTARTS.labels(kind=self.resource.kind, reason="expired").inc()
                self.resource_version = ""
            except Refused as err:
                log.warning(
                    "%s: the apiserver refused a streaming list (%s); paging a list instead",
                    self.resource.kind,
                    err,
                )
                self.watch_list = False
            except Exception as err:  # the apiserver may be restarting: keep trying
                metrics.WATCH_RESTARTS.labels(kind=self.resource.kind, reason="error").inc()
                log.warning(
                    "%s: watch failed (%s: %s); retrying in %.1fs",
                    self.resource.kind,
                    type(err).__name__,
                    err,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff[1])

    # -- the initial state by paged list (the fallback)

    async def _list_all(self) -> None:
        keep: set[str] = set()
        token, version = "", ""
        accept = PARTIAL_METADATA_LIST if self.resource.metadata_only else JSON
        while True:
            query = [("limit", str(self.page))] + ([("continue", token)] if token else [])
            response = await self.kube.open_stream(self.resource.path, query, accept, 120)
            try:
                if response.status == 410:
                    raise Expired()  # the continue token expired: start over
                if response.status != 200:
                    raise await _refusal(response)
                body = await response.read()
            finally:
                response.release()
            try:
                listed = self._list.decode(body)
            except msgspec.DecodeError as err:
                raise StreamError(200, "Undecodable", str(err)) from err
            for item in listed.items:
                key = self.resource.key(item)
                if self._apply("ADDED", item, key):
                    keep.add(key)
            token, version = listed.metadata.continue_, listed.metadata.resource_version
            if not token:
                break
        self.sink.prune(keep)
        self.resource_version = version
        self._mark_synced("a paged list")

    # -- the watch (with or without the initial state)

    async def _stream(self, *, initial: bool) -> None:
        query = [
            ("watch", "1"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self.timeout_seconds)),
        ]
        if initial:
            query += [("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan")]
        else:
            query.append(("resourceVersion", self.resource_version))
        accept = PARTIAL_METADATA if self.resource.metadata_only else JSON
        read_timeout = self.timeout_seconds + 30
        response = await self.kube.open_stream(self.resource.path, query, accept, read_timeout)
        keep: set[str] | None = set() if initial else None
        try:
            if response.status == 410:
                raise Expired()
            if response.status != 200:
                error = await _refusal(response)
                if initial and error.status in (400, 422):
                    raise Refused(str(error))
                raise error
            async for line in _lines(response):
                keep = self._line(line, keep)
        finally:
            response.release()
        if keep is not None:
            # The stream ended before the initial state did: an apiserver that ignores
            # sendInitialEvents sends no end bookmark, so page a list from now on.
            raise Refused("the stream ended before its initial-events-end bookmark")

    def _line(self, line: bytes, keep: set[str] | None) -> set[str] | None:
        """Apply one watch line; returns the keys still to collect for the initial state,
        or None once it is complete."""
        try:
            event = _EVENT.decode(line)
        except msgspec.DecodeError as err:
            self._undecodable(err, line)
            return keep
        if event.type == "ERROR":
            status = _STATUS.decode(event.object)
            if status.code == 410:
                raise Expired()
            raise StreamError(status.code, status.reason, status.message)
        if event.type == "BOOKMARK":
            meta = _META.decode(event.object).metadata
            self.resource_version = meta.resource_version or self.resource_version
            if keep is not None and (meta.annotations or {}).get(INITIAL_EVENTS_END) == "true":
                self.sink.prune(keep)
                self._mark_synced("a streaming list")
                return None
            return keep
        try:
            obj = self._objects.decode(event.object)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            self._undecodable(err, line)
            self._advance(event.object)
            return keep
        key = self.resource.key(obj)
        if self._apply(event.type, obj, key) and keep is not None:
            keep.add(key)
        self.resource_version = obj.metadata.resource_version or self.resource_version  # type: ignore[attr-defined]
        return keep

    def _advance(self, raw: msgspec.Raw) -> None:
        # An object we cannot read still moves the stream on: resume after it, not before.
        try:
            version = _VERSION.decode(raw).metadata.resource_version
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        self.resource_version = version or self.resource_version

    def _apply(self, kind: str, obj: T, key: str) -> bool:
        if not key:
            self._undecodable(ValueError("no uid or name"), b"")
            return False
        counter = self._events.get(kind)
        if counter is None:
            self._undecodable(ValueError(f"unknown event type {kind!r}"), b"")
            return False
        counter.inc()
        try:
            if kind == "DELETED":
                self.sink.delete(obj)
            else:
                self.sink.upsert(obj)
        except (msgspec.ValidationError, ValueError, TypeError, KeyError) as err:
            # Bad input must never stop the informer: count it, say so once, go on.
            self._undecodable(err, b"")
            return False
        return True

    def _undecodable(self, err: Exception, line: bytes) -> None:
        self._errors.inc()
        self.decode_errors += 1
        if self.decode_errors == 1:
            log.warning(
                "%s: skipped an object that does not decode (%s): %.200r",
                self.resource.kind,
                err,
                line,
            )
        else:
            log.debug("%s: skipped an undecodable object (%s)", self.resource.kind, err)

    def _mark_synced(self, how: str) -> None:
        if not self.synced.is_set():
            log.info(
                "%s: initial state read by %s at resourceVersion %s",
                self.resource.kind,
                how,
                self.resource_version,
            )
            self.synced.set()
