"""Which pods the scraper reads: the active pods, with an IP, of a policy whose Metric signal
names a Prometheus endpoint; nobody when no policy scrapes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from schedpolicy.shell.deletion_cost.scraper import Scraper
from schedpolicy.shell.reconciler import Reconciler
from schedpolicy.view.cluster import ClusterView
from schedpolicy.view.deletion_cost.decisions import PodOutcome

SCRAPED = {
    "type": "Metric",
    "metric": {
        "prometheus": {"port": 9090, "metric": "conns"},
        "bands": [{"min": 0, "points": 0}, {"min": 50, "points": 600}],
    },
}
CONSOLIDATION = {"type": "NodeConsolidation", "nodeConsolidation": {"points": 300}}


def policy(name: str, *signals: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": {"deletionCost": {"signals": list(signals)}},
    }


def pod(uid: str, ip: str | None = "10.0.0.1", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": phase, "podIP": ip},
    }


def scraper(view: ClusterView, governed: dict[str, str]) -> Scraper:
    outcomes = {
        uid: PodOutcome(frozenset({name}), name, None, None) for uid, name in governed.items()
    }
    return Scraper(view, cast(Reconciler, SimpleNamespace(outcomes=outcomes)))


def test_only_active_pods_with_an_ip_of_a_scraping_policy() -> None:
    view = ClusterView()
    view.upsert_policy(policy("scrapes", SCRAPED, CONSOLIDATION))
    view.upsert_policy(policy("packs", CONSOLIDATION))
    for body in (pod("a"), pod("b", ip=None), pod("c", phase="Succeeded"), pod("d"), pod("e")):
        view.upsert_pod(body)
    governed = {"a": "scrapes", "b": "scrapes", "c": "scrapes", "d": "packs", "gone": "scrapes"}
    found = scraper(view, governed).targets()
    assert [(p.uid, src.port, src.metric, age) for p, src, age in found] == [
        ("a", 9090, "conns", 60)
    ]


def test_nobody_when_no_policy_scrapes() -> None:
    view = ClusterView()
    view.upsert_policy(policy("packs", CONSOLIDATION))
    view.upsert_pod(pod("a"))
    assert scraper(view, {"a": "packs"}).targets() == []
