"""Observability as an admin installs it: prometheus-operator and a Prometheus it manages run
on the real node, discover the chart's targets through its ServiceMonitors, load its
PrometheusRule, and every panel of the chart's two dashboards returns data.

The tests run in order and share one install: each builds on what the one before left.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import LocalCluster, chart, monitoring
from localcluster.monitoring import PrometheusAPI
from tests.e2e.kubeobjects import PAUSE_IMAGE, wait_until
from tests.incluster.conftest import POOL, VALUES, WORKDIR
from tests.incluster.workloads import APP_NS, SCHEDULER, gpu_deployment, policies

pytestmark = pytest.mark.incluster
NS = chart.NAMESPACE
MONITORING_VALUES = Path(__file__).with_name("monitoring-values.yaml")
DASHBOARDS = chart.CHART / "dashboards"
PANEL_DATA = WORKDIR / "panels"
# The Services the ServiceMonitors select, which Prometheus names the jobs after, and how
# many pods each has (the chart's default replicas).
JOBS = {
    f"{chart.RELEASE}-metrics": 2,
    f"{chart.RELEASE}-webhook-metrics": 2,
    f"{SCHEDULER}-metrics": 2,
}
WINDOW_SECONDS = 180


@pytest.fixture(scope="module")
def prometheus(cluster: LocalCluster) -> Iterator[PrometheusAPI]:
    try:
        monitoring.install_operator(cluster)
        monitoring.install_prometheus(cluster)
        chart.install(cluster.kubeconfig, VALUES, more_values=(MONITORING_VALUES,))
        cluster.kubectl("create", "namespace", APP_NS)
        cluster.kubectl("apply", "-f", "-", objects=policies())
        yield PrometheusAPI(cluster)
    finally:
        chart.uninstall(cluster.kubeconfig)
        monitoring.uninstall(cluster)


def up_by_job(api: PrometheusAPI) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for series in api.query(f'up{{namespace="{NS}"}}'):
        found.setdefault(series["metric"]["job"], []).append(float(series["value"][1]))
    return found


def wait_all_up(api: PrometheusAPI) -> None:
    def all_up() -> dict[str, list[float]] | None:
        found = up_by_job(api)
        every = all(sorted(found.get(job, [])) == [1.0] * n for job, n in JOBS.items())
        return found if every else None

    try:
        wait_until(all_up, within=180, what="every chart target to be up")
    except AssertionError as err:
        raise AssertionError(f"{err}; up by job: {up_by_job(api)}") from None


def test_prometheus_scrapes_every_chart_target_through_its_service_monitors(
    prometheus: PrometheusAPI,
) -> None:
    """Prometheus finds the controller, webhook and scheduler through the chart's
    ServiceMonitors and every target is up; the scheduler's is scraped over HTTPS with the
    ServiceAccount's token."""
    wait_all_up(prometheus)
    targets = prometheus.get("targets", state="active")["activeTargets"]
    scheduler = [t for t in targets if t["labels"].get("job") == f"{SCHEDULER}-metrics"]
    # Over HTTPS, with the ServiceAccount's token, authorized by the chart's binding only.
    assert scheduler
    assert all(t["scrapeUrl"].startswith("https://") for t in scheduler), scheduler
    assert all(t["health"] == "up" for t in scheduler), scheduler
    pools = {t["scrapePool"] for t in targets if t["labels"].get("namespace") == NS}
    assert {f"serviceMonitor/{NS}/{chart.RELEASE}/0", f"serviceMonitor/{NS}/{SCHEDULER}/0"} <= pools


def test_the_chart_alerts_are_loaded_and_healthy(prometheus: PrometheusAPI) -> None:
    """Prometheus loads the chart's 9 alerts from its PrometheusRule, all of them healthy."""

    def loaded() -> list[dict[str, Any]] | None:
        groups = prometheus.get("rules", type="alert")["groups"]
        rules = [r for g in groups for r in g["rules"] if NS in g["file"]]
        return rules or None

    rules = wait_until(loaded, within=120, what="the PrometheusRule to be loaded")
    names = {r["name"] for r in rules}
    assert len(names) == 9, names
    assert "SchedpolicyMemoryNearLimit" in names
    bad = {r["name"]: r.get("lastError") for r in rules if r.get("health") not in ("ok", "unknown")}
    assert bad == {}


def drive_load(cluster: LocalCluster) -> None:
    """A GPU Deployment through the webhook and the secondary scheduler, scaled up and down,
    so costs are written and pods deleted by the ReplicaSet controller."""
    cluster.kubectl("apply", "-f", "-", objects=[gpu_deployment(4)])
    for replicas in (6, 2):
        time.sleep(10)
        cluster.kubectl("scale", "deployment", "gpu", "-n", APP_NS, f"--replicas={replicas}")
    cluster.kubectl("rollout", "status", "deployment/gpu", "-n", APP_NS, "--timeout=120s")


def promql_regex_literal(value: str) -> str:
    """A value matched literally by a regex inside a PromQL string: regex metacharacters
    escaped, and each escaping backslash doubled for the string literal."""
    return re.sub(r"([.*+?()\[\]{}|^$\\])", r"\\\\\1", value)


def variables(api: PrometheusAPI, board: dict[str, Any]) -> dict[str, str]:
    """Each query variable as Grafana substitutes "All" of a multi-value variable in a
    `=~` matcher: the alternation of its values."""
    out = {}
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query.strip())
        assert m, f"{board['uid']}: variable {var['name']} is not label_values(...)"
        values = api.get(f"label/{m.group(2)}/values", **{"match[]": m.group(1)})
        assert values, f"{board['uid']}: variable ${var['name']} has no values ({query})"
        out[var["name"]] = "(" + "|".join(promql_regex_literal(v) for v in values) + ")"
    return out


def substitute(expr: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        expr = expr.replace(f"${{{name}}}", value).replace(f"${name}", value)
    return expr


def test_every_panel_of_both_dashboards_returns_series(
    cluster: LocalCluster, prometheus: PrometheusAPI
) -> None:
    """After a GPU Deployment is scaled up and down, every query of every panel in both
    dashboards returns series, with $job substituted as Grafana would; a failure names each
    empty panel."""
    # Load before the first scrape would not show in any rate().
    wait_all_up(prometheus)
    drive_load(cluster)
    # Rates over 5m need two scrapes after the load; give Prometheus several.
    time.sleep(30)
    empty: list[str] = []
    PANEL_DATA.mkdir(parents=True, exist_ok=True)
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        values = variables(prometheus, board)
        data = []
        for panel in board["panels"]:
            for target in panel["targets"]:
                expr = substitute(target["expr"], values)
                result = prometheus.query_range(expr, WINDOW_SECONDS)
                if not result:
                    empty.append(f"{board['uid']} / {panel['title']!r} ({target['refId']}): {expr}")
                data.append(
                    {
                        "panel": panel["title"],
                        "legend": target.get("legendFormat", ""),
                        "unit": panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""),
                        "result": result,
                    }
                )
        # What the panels showed, for scripts/render_panels.py.
        (PANEL_DATA / f"{board['uid']}.json").write_text(json.dumps(data))
    assert empty == [], "panels with no series:\n" + "\n".join(empty)


def alert_state(api: PrometheusAPI, name: str) -> str | None:
    states = [a["state"] for a in api.get("alerts")["alerts"] if a["labels"]["alertname"] == name]
    return "firing" if "firing" in states else (states[0] if states else None)


def test_pods_left_pending_by_a_stopped_scheduler_raise_the_alert(
    cluster: LocalCluster, prometheus: PrometheusAPI
) -> None:
    """With the chart's scheduler scaled to 0, a pod waiting for it turns
    SchedpolicyPodsPending to pending, then to firing."""
    assert alert_state(prometheus, "SchedpolicyPodsPending") is None
    cluster.kubectl("scale", "deployment", SCHEDULER, "-n", NS, "--replicas=0")
    try:
        cluster.kubectl(
            "wait",
            "--for=delete",
            "pod",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/component=scheduler",
            "--timeout=60s",
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "waits", "namespace": APP_NS, "labels": {"app": "waits"}},
            "spec": {"nodeSelector": POOL, "containers": [{"name": "c", "image": PAUSE_IMAGE}]},
        }
        cluster.kubectl("apply", "-f", "-", objects=[pod])
        assert (
            cluster.kubectl(
                "get", "pod", "waits", "-n", APP_NS, "-o", "jsonpath={.spec.schedulerName}"
            )
            == SCHEDULER
        )
        seen = []

        def turned(state: str) -> str | None:
            now = alert_state(prometheus, "SchedpolicyPodsPending")
            if now and (not seen or seen[-1] != now):
                seen.append(now)
            return now if now == state else None

        wait_until(lambda: turned("pending"), within=90, what="the alert to be pending")
        wait_until(lambda: turned("firing"), within=90, what="the alert to fire")
        assert seen == ["pending", "firing"]
    finally:
        cluster.kubectl(
            "delete", "pod", "waits", "-n", APP_NS, "--ignore-not-found", "--wait=false"
        )
        cluster.kubectl("scale", "deployment", SCHEDULER, "-n", NS, "--replicas=2")
