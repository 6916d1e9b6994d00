"""The chart's monitoring against the processes it watches: every query of its two
dashboards reads a metric that the controller, the webhook or the scheduler really exports, and
the scheduler's /metrics is behind the token the chart's ServiceMonitor uses."""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.webhook import LoopbackWebhook
from tests.e2e.conftest import ALL_ON, OPERATOR, render
from tests.e2e.kubeobjects import PAUSE_IMAGE, wait_until

pytestmark = pytest.mark.e2e


_PROMQL_NOISE = re.compile(
    r'"(?:[^"\\]|\\.)*"'  # strings
    r"|\{[^}]*\}"  # label matchers
    r"|\[[^\]]*\]"  # range selectors
    r"|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"  # label lists
)
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")
_PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions,
    keywords, label names or anything inside strings, matchers, ranges or groupings."""
    bare = _PROMQL_NOISE.sub(" ", expr)
    return {m for m in _IDENTIFIER.findall(bare) if m.lower() not in _PROMQL_WORDS}


def test_metric_names_reads_promql_as_prometheus_does() -> None:
    """The dashboards' check reads metric names from PromQL as Prometheus does: functions,
    keywords, label names, strings, matchers, ranges and groupings are not metrics."""
    expr = (
        'histogram_quantile(0.95, sum by (le, profile) (rate(a_bucket{job=~"$job",x="y{z}"}[5m])))'
        " / on (le) group_left (p) b_total + c offset 5m > bool 0.5 and d"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c", "d"}


def exported(text: str) -> set[str]:
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        suffixes = {
            "counter": ["_total", "_created"],
            "histogram": ["_bucket", "_sum", "_count", "_created"],
            "summary": ["_sum", "_count"],
        }.get(family.type, [])
        names.update(family.name + s for s in suffixes)
        names.update(s.name for s in family.samples)
    return names


def scrape_scheduler(cluster: LocalCluster, token: str | None) -> str:
    """The secondary scheduler's HTTPS /metrics, as a Prometheus with this token sees it."""
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    url = f"https://127.0.0.1:{cluster.ports.secondary_scheduler}/metrics"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, context=insecure, timeout=5) as resp:
        return str(resp.read().decode())


def prometheus_token(cluster: LocalCluster) -> str:
    """A token of the Prometheus ServiceAccount the all-on values name, bound by the chart's
    own metrics-reader ClusterRole and binding."""
    rbac = [
        d
        for d in render(ALL_ON)
        if d["kind"] in ("ClusterRole", "ClusterRoleBinding")
        and d["metadata"]["name"].endswith("-metrics-reader")
    ]
    assert sorted(d["kind"] for d in rbac) == ["ClusterRole", "ClusterRoleBinding"]
    (subject,) = next(d for d in rbac if d["kind"] == "ClusterRoleBinding")["subjects"]
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": subject["namespace"]},
    }
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": subject["name"], "namespace": subject["namespace"]},
    }
    cluster.kubectl("apply", "-f", "-", objects=[namespace, account, *rbac])
    return cluster.kubectl("create", "token", subject["name"], "-n", subject["namespace"]).strip()


def test_dashboards_query_only_exported_metrics(
    cluster: LocalCluster, operator: OperatorProcess, tmp_path: Path
) -> None:
    """Every query of both dashboards reads only metrics that the controller, the webhook or
    the scheduler export, each dashboard has the panels the chart promises, and the
    scheduler's /metrics refuses a scrape without the token the chart's ServiceMonitor uses."""
    webhook = LoopbackWebhook(cluster, tmp_path, "dashboard-probe").start(tmp_path / "webhook.log")
    try:
        # Give the secondary scheduler something to schedule, so its attempt metrics exist.
        cluster.kubectl(
            "run",
            "dash-probe",
            "-n",
            "default",
            f"--image={PAUSE_IMAGE}",
            "--overrides",
            json.dumps({"spec": {"schedulerName": "schedpolicy-scheduler"}}),
        )
        wait_until(
            lambda: (
                cluster.kubectl(
                    "get", "pod", "dash-probe", "-n", "default", "-o", "jsonpath={.spec.nodeName}"
                ).strip()
                or None
            ),
            within=30,
            what="the probe pod to be scheduled",
        )
        ours = exported(operator.scrape()) | exported(webhook.scrape())
        theirs = exported(scrape_scheduler(cluster, prometheus_token(cluster)))
        # Without the token the scheduler refuses: its /metrics really is behind the chart's
        # bearer-token authorization, which the ServiceMonitor relies on.
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape_scheduler(cluster, None)
        assert refused.value.code in (401, 403)
    finally:
        webhook.stop()
        cluster.kubectl(
            "delete", "pod", "dash-probe", "-n", "default", "--grace-period=0", "--wait=false"
        )
        cluster.kubectl("delete", "namespace", "monitoring", "--ignore-not-found", "--wait=false")
        for kind in ("clusterrole", "clusterrolebinding"):
            cluster.kubectl("delete", kind, f"{OPERATOR}-metrics-reader", "--ignore-not-found")

    rendered = {d["metadata"]["name"]: d for d in render(ALL_ON) if d["kind"] == "ConfigMap"}
    dashboards = [d for name, d in rendered.items() if "-dashboard-" in name]
    assert len(dashboards) == 2
    for cm in dashboards:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        for key, text in cm["data"].items():
            board = json.loads(text)
            queries = [t["expr"] for p in board["panels"] for t in p["targets"]]
            assert queries, key
            used = {m for q in queries for m in metric_names(q)}
            assert used, key
            unknown = used - ours - theirs
            assert unknown == set(), f"{key} queries metrics nobody exports: {unknown}"
    # Each dashboard shows what the chart promises, as panels that query the right metric.
    boards = {
        json.loads(text)["uid"]: json.loads(text)["panels"]
        for cm in dashboards
        for text in cm["data"].values()
    }
    promised = {
        "schedpolicy-operator": {
            "Cost writes/s by result": "schedpolicy_cost_writes_total",
            "Cost writes skipped/s by reason": "schedpolicy_cost_skipped_total",
            "Reconcile duration p95": "schedpolicy_reconcile_duration_seconds_bucket",
            "Pods per cost band": "schedpolicy_cost_band_pods",
            "Node label writes/s by result": "schedpolicy_node_label_writes_total",
            "Webhook latency p50 / p99": "schedpolicy_webhook_duration_seconds_bucket",
            "GPU nodes labelled, by policy": "schedpolicy_gpu_nodes_labelled",
            "Controller replicas leading": "schedpolicy_leader",
        },
        "schedpolicy-scheduler": {
            "Scheduling attempt duration p95 by profile and result": (
                "scheduler_scheduling_attempt_duration_seconds_bucket"
            ),
            "Scheduling attempts/s by result": "scheduler_schedule_attempts_total",
        },
    }
    for uid, panels in promised.items():
        shown = {
            p["title"]: {m for t in p["targets"] for m in metric_names(t["expr"])}
            for p in boards[uid]
        }
        for title, metric in panels.items():
            assert metric in shown.get(title, set()), f"{uid}: no panel {title!r} on {metric}"
