"""Reads the per-pod gauges of Metric signals that use a Prometheus endpoint.

Only pods governed by a policy with such a signal are scraped, each within the
signal's own timeout; a slow or broken endpoint yields a Rejection, which
leaves the pod's cost as it is. Results go into the view, and the reconciler
is told which pods to look at again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import aiohttp

from schedpolicy.core.deletion_cost.samples import Rejection, Sample, from_exposition
from schedpolicy.core.deletion_cost.signals.metric import MetricSignal, PrometheusSource
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.view.cluster import Affected, ClusterView, PodRecord

log = logging.getLogger("schedpolicy.scraper")

Target = tuple[PodRecord, PrometheusSource, int]  # pod, source, maxAgeSeconds


class Scraper:
    def __init__(self, view: ClusterView, reconciler: Reconciler, concurrency: int = 32) -> None:
        self.view = view
        self.reconciler = reconciler
        self.limit = asyncio.Semaphore(concurrency)

    def targets(self) -> list[Target]:
        # The policies that scrape first, then only their pods: a look at every pod's outcome
        # took 9% of the controller at 150k pods (B8's churn) with no policy scraping at all.
        sources: dict[str, list[tuple[PrometheusSource, int]]] = {}
        for policy in self.view.policies():
            spec = policy.spec.deletion_cost
            for signal in spec.signals if spec else ():
                metric = signal.params()
                if isinstance(metric, MetricSignal) and metric.prometheus is not None:
                    pair = (metric.prometheus, metric.max_age_seconds)
                    sources.setdefault(policy.name, []).append(pair)
        found: list[Target] = []
        if not sources:
            return found
        for uid, outcome in self.reconciler.outcomes.items():
            scraped = sources.get(outcome.cost_policy or "")
            if not scraped:
                continue
            pod = self.view.pods.get(uid)
            if pod is None or not pod.active or pod.pod_ip is None:
                continue
            found.extend((pod, source, age) for source, age in scraped)
        return found

    async def run(self) -> None:
        await self.reconciler.synced.wait()
        async with aiohttp.ClientSession() as session:
            while True:
                targets = self.targets()
                if targets:
                    await asyncio.gather(
                        *(self.scrape(session, pod, src) for pod, src, _ in targets)
                    )
                # Scrape often enough that a healthy endpoint never looks stale.
                ages = [age for _, _, age in targets] or [20]
                await asyncio.sleep(max(1.0, min(10.0, min(ages) / 3)))

    async def scrape(
        self, session: aiohttp.ClientSession, pod: PodRecord, src: PrometheusSource
    ) -> None:
        async with self.limit:
            result = await read_endpoint(session, pod.pod_ip or "", src)
        key = (pod.uid, src.port, src.path, src.metric)
        if self.view.pods.get(pod.uid) is None:
            return
        if self.view.record_sample(key, result):
            self.reconciler.changed(Affected(pods={pod.uid}))


async def read_endpoint(
    session: aiohttp.ClientSession, pod_ip: str, src: PrometheusSource
) -> Sample | Rejection:
    """One reading of one pod's gauge, within the signal's timeout. Also used by `explain`."""
    url = f"http://{pod_ip}:{src.port}{src.path}"
    try:
        async with asyncio.timeout(src.timeout_seconds):
            async with session.get(url) as resp:
                if resp.status != 200:
                    return Rejection("unreachable", f"{url} answered HTTP {resp.status}")
                text = await resp.text()
                return from_exposition(text, src.metric, datetime.now(UTC))
    except TimeoutError:
        return Rejection("timeout", f"{url} did not answer within {src.timeout_seconds}s")
    except (aiohttp.ClientError, OSError) as err:
        return Rejection("unreachable", f"{url}: {err}")
