"""The envelope's own HTTP client: the admin's certificate over one aiohttp session, many
requests in flight.

kubectl creates a few objects a second here, which would take hours at 150k pods; the
apiserver itself sustains far more when the requests arrive concurrently and small.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp

from localcluster import LocalCluster

JSON = dict[str, Any]
T = TypeVar("T")


@dataclass
class Tally:
    """What a batch of requests came back with, by HTTP status."""

    codes: dict[int, int] = field(default_factory=dict)
    retried: int = 0

    def count(self, code: int) -> None:
        self.codes[code] = self.codes.get(code, 0) + 1


class Api:
    def __init__(self, cluster: LocalCluster, concurrency: int = 48) -> None:
        self.server = cluster.server
        self._ssl = cluster.ssl_context()
        self.concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=self.concurrency),
            timeout=aiohttp.ClientTimeout(total=120),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use Api as an async context manager"
        return self._session

    async def request(
        self, method: str, path: str, body: JSON | None = None, tally: Tally | None = None
    ) -> tuple[int, JSON]:
        """One request, retried while the apiserver answers 429 or 5xx (APF, a busy etcd),
        as client-go would after its Retry-After."""
        for attempt in range(30):
            async with self.session.request(
                method,
                self.server + path,
                data=None if body is None else json.dumps(body),
                headers={"Content-Type": "application/json"},
            ) as resp:
                payload = await resp.read()
                if resp.status == 429 or resp.status >= 500:
                    if tally is not None:
                        tally.count(resp.status)
                        tally.retried += 1
                    await asyncio.sleep(min(1.0, 0.05 * 2**attempt))
                    continue
                if tally is not None:
                    tally.count(resp.status)
                return resp.status, json.loads(payload) if payload else {}
        raise RuntimeError(f"{method} {path}: still refused after 30 attempts")

    async def create_all(
        self,
        items: Iterable[tuple[str, JSON]],
        tally: Tally,
        progress: Callable[[int], None],
        halt: Callable[[], bool] = lambda: False,
    ) -> list[JSON]:
        """POST each (path, body), `concurrency` at a time; the created objects, in order.
        `halt` is asked every 1,000 creates: once it says so, no more are sent, and the
        objects not created are left out."""
        work = list(items)
        out: list[JSON] = [{} for _ in work]
        next_index = 0
        done = 0
        halted = False

        async def worker() -> None:
            nonlocal next_index, done, halted
            while next_index < len(work) and not halted:
                i = next_index
                next_index += 1
                path, body = work[i]
                code, created = await self.request("POST", path, body, tally)
                if code not in (200, 201):
                    raise RuntimeError(f"POST {path} {body['metadata']['name']}: {code} {created}")
                out[i] = created
                done += 1
                if done % 1000 == 0:
                    halted = halted or halt()
                if done % 5000 == 0:
                    progress(done)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return [o for o in out if o]

    async def pages(self, path: str, limit: int = 5000) -> AsyncIterator[JSON]:
        """Every item of a list, a page at a time, so that no one response is huge."""
        token = ""
        while True:
            query = f"?limit={limit}" + (f"&continue={token}" if token else "")
            code, page = await self.request("GET", path + query)
            if code != 200:
                raise RuntimeError(f"GET {path}: {code} {page}")
            for item in page["items"]:
                yield item
            token = page["metadata"].get("continue") or ""
            if not token:
                return


def run(coro: Callable[[Api], Awaitable[T]], cluster: LocalCluster, concurrency: int = 48) -> T:
    async def go() -> T:
        async with Api(cluster, concurrency) as api:
            return await coro(api)

    return asyncio.run(go())
