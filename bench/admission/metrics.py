"""The apiserver's and the webhook's Prometheus histograms and counters, and what B3 reads
from them: bucket shares and interpolated quantiles between two scrapes."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from localcluster import LocalCluster

WEBHOOK = "hints.schedpolicy.io"
CREATE = {"verb": "POST", "resource": "pods", "subresource": ""}
HOOK_MATCH = {"name": WEBHOOK, "operation": "CREATE", "type": "admit"}
ADMISSION = "apiserver_admission_webhook_admission_duration_seconds"
REQUESTS = "apiserver_request_duration_seconds"
FAIL_OPEN = "apiserver_admission_webhook_fail_open_count"

Buckets = dict[float, float]  # le -> cumulative count


def scrape(url: str, cluster: LocalCluster | None = None) -> str:
    """A /metrics page; the apiserver's with the cluster's admin credentials."""
    context = cluster.ssl_context() if cluster is not None else None
    with urllib.request.urlopen(url, context=context, timeout=10) as r:
        return str(r.read().decode())


def apiserver_metrics(cluster: LocalCluster) -> str:
    return scrape(f"{cluster.server}/metrics", cluster)


def histogram(text: str, family: str, match: dict[str, str] | None = None) -> Buckets:
    """Cumulative bucket counts of one histogram, summed over series that match `match`."""
    buckets: Buckets = {}
    for fam in text_string_to_metric_families(text):
        if fam.name != family:
            continue
        for s in fam.samples:
            if s.name.endswith("_bucket") and all(
                s.labels.get(k) == v for k, v in (match or {}).items()
            ):
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
    return buckets


def own_histogram(port: int) -> Buckets:
    text = scrape(f"http://127.0.0.1:{port}/metrics")
    return histogram(text, "schedpolicy_webhook_duration_seconds")


def histograms(cluster: LocalCluster, own_port: int | None) -> dict[str, Buckets]:
    """Creates and webhook calls as the apiserver timed them, and the webhook's own calls
    (when it has a metrics port)."""
    text = apiserver_metrics(cluster)
    return {
        "create": histogram(text, REQUESTS, CREATE),
        "hook": histogram(text, ADMISSION, HOOK_MATCH),
        "own": own_histogram(own_port) if own_port else {},
    }


def counter(text: str, family: str, match: dict[str, str]) -> float:
    total = 0.0
    for fam in text_string_to_metric_families(text):
        if fam.name in (family, family.removesuffix("_total")):
            for s in fam.samples:
                if all(s.labels.get(k) == v for k, v in match.items()):
                    total += s.value
    return total


def bucket_shares(before: Buckets, after: Buckets) -> dict[str, float]:
    """The share of observations in each bucket, from cumulative counts (le -> share)."""
    delta = sorted((le, after.get(le, 0.0) - before.get(le, 0.0)) for le in after)
    total = delta[-1][1] if delta else 0.0
    shares, below = {}, 0.0
    for le, count in delta:
        label = "+Inf" if le == float("inf") else f"{le * 1000:g} ms"
        shares[label] = round((count - below) / total, 4) if total else 0.0
        below = count
    return shares


def under(shares: dict[str, float], ms: float) -> float:
    return sum(v for k, v in shares.items() if k != "+Inf" and float(k.split()[0]) <= ms)


def bucket_quantile(before: Buckets, after: Buckets, q: float) -> float:
    """Quantile of the observations between two scrapes, interpolated within buckets (ms)."""
    delta = sorted((le, after.get(le, 0.0) - before.get(le, 0.0)) for le in after)
    total = delta[-1][1] if delta else 0.0
    if total <= 0:
        return float("nan")
    rank = q * total
    lower_le, lower_count = 0.0, 0.0
    for le, count in delta:
        if count >= rank:
            if le == float("inf"):
                return lower_le * 1000
            span = count - lower_count
            fraction = (rank - lower_count) / span if span else 1.0
            return (lower_le + (le - lower_le) * fraction) * 1000
        lower_le, lower_count = le, count
    return lower_le * 1000
