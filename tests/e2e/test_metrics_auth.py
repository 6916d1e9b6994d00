"""Authenticated /metrics, judged by the real apiserver: the controller and the webhook
serve HTTPS only to callers whose token a TokenReview accepts and whom a
SubjectAccessReview allows GET on /metrics, and speak TLS 1.2+ with modern ciphers only."""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcluster import LocalCluster, chart
from localcluster.operator_process import OperatorProcess
from localcluster.pki import Authority
from localcluster.ports import free_port
from localcluster.webhook import LoopbackWebhook

pytestmark = pytest.mark.e2e


@dataclass
class Endpoint:
    name: str
    port: int
    ca: Path | None  # None: a self-signed certificate, not verified


@pytest.fixture(scope="module")
def endpoints(
    cluster: LocalCluster, crd: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Endpoint]]:
    """The controller with a CA-issued certificate, the webhook with its self-signed one."""
    work = tmp_path_factory.mktemp("metrics-auth")
    authority = Authority(work / "pki")
    pair = authority.issue("metrics", common_name="schedpolicy-metrics", hosts=("127.0.0.1",))
    controller_port, webhook_port = free_port(), free_port()
    controller = OperatorProcess(
        cluster.operator_kubeconfig,
        work / "controller.log",
        f"--metrics-port={controller_port}",
        "--metrics-address=127.0.0.1",
        f"--metrics-cert={pair.cert}",
        f"--metrics-key={pair.key}",
    )
    hook = LoopbackWebhook(cluster, work / "webhook-pki", "unused")
    webhook: OperatorProcess | None = None
    try:
        # Inside the try: a webhook that never syncs must not leave the controller running.
        webhook = hook.start(
            work / "webhook.log",
            f"--metrics-port={webhook_port}",
            "--metrics-address=127.0.0.1",
            metrics=False,
        )
        controller.wait_for_log("view synced")
        yield [
            Endpoint("controller", controller_port, authority.cert_path),
            Endpoint("webhook", webhook_port, None),
            # The webhook's /hints, which the apiserver calls.
            Endpoint("admission", hook.port, hook.ca),
        ]
    finally:
        controller.stop()
        if webhook is not None:
            webhook.stop()


def _context(endpoint: Endpoint) -> ssl.SSLContext:
    if endpoint.ca is None:
        return ssl._create_unverified_context()
    return ssl.create_default_context(cafile=str(endpoint.ca))


def _scrape(endpoint: Endpoint, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(f"https://127.0.0.1:{endpoint.port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=_context(endpoint), timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture(scope="module")
def tokens(cluster: LocalCluster) -> Iterator[dict[str, str]]:
    """Tokens of a ServiceAccount bound by the chart's metrics-reader ClusterRoleBinding,
    and of one without it."""
    ns = "metrics-auth"
    cluster.kubectl("create", "namespace", ns)
    for account in ("reader", "stranger"):
        cluster.kubectl("create", "serviceaccount", account, "-n", ns)
    values = {
        "monitoring": {
            "prometheus": {"serviceAccountName": "reader", "serviceAccountNamespace": ns}
        }
    }
    rbac = chart.render("templates/monitoring/monitoring.yaml", values=values)
    assert {d["kind"] for d in rbac} == {"ClusterRole", "ClusterRoleBinding"}
    cluster.kubectl("apply", "-f", "-", objects=rbac)
    try:
        yield {
            account: cluster.kubectl("create", "token", account, "-n", ns).strip()
            for account in ("reader", "stranger")
        }
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", objects=rbac)
        cluster.kubectl("delete", "namespace", ns, "--wait=false")


@pytest.mark.parametrize("which", ["controller", "webhook"])
def test_metrics_need_a_token_the_apiserver_accepts_and_authorizes(
    endpoints: list[Endpoint], tokens: dict[str, str], which: str
) -> None:
    """/metrics of the controller and of the webhook answers 401 without a token or with a
    bad one, 403 naming a ServiceAccount that the chart's metrics-reader binding does not
    cover, and the metrics to one it covers."""
    (endpoint,) = [e for e in endpoints if e.name == which]
    status, body = _scrape(endpoint, None)
    assert status == 401, body
    status, body = _scrape(endpoint, "not-a-token")
    assert status == 401, body
    status, body = _scrape(endpoint, tokens["stranger"])
    assert status == 403, body
    assert "metrics-auth:stranger" in body, body
    status, body = _scrape(endpoint, tokens["reader"])
    assert status == 200, body
    family = "schedpolicy_webhook_requests_total" if which == "webhook" else "schedpolicy_leader"
    assert family in body


@pytest.mark.parametrize("which", ["controller", "webhook", "admission"])
def test_plain_http_on_the_tls_port_is_refused(endpoints: list[Endpoint], which: str) -> None:
    """Plain HTTP on the metrics and admission ports gets no HTTP answer."""
    (endpoint,) = [e for e in endpoints if e.name == which]
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    conn.request("GET", "/metrics")
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        conn.getresponse()
    conn.close()


def _handshake(port: int, version: ssl.TLSVersion, ciphers: str) -> str:
    """The negotiated cipher, or the server's refusal as the client saw it."""
    context = ssl._create_unverified_context()
    context.minimum_version = context.maximum_version = version
    # Let this client offer old protocols and ciphers, so that a refusal is the server's.
    context.set_ciphers(f"{ciphers}:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                cipher = tls.cipher()
                return cipher[0] if cipher else ""
        except ssl.SSLError as err:
            return f"refused: {err.reason}"


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize("which", ["controller", "webhook", "admission"])
def test_only_tls_12_and_later_with_modern_ciphers(endpoints: list[Endpoint], which: str) -> None:
    """The metrics and admission ports speak TLS 1.2 with AES-GCM and TLS 1.3; they refuse
    TLS 1.0 and 1.1, CBC with SHA-1 and RSA key exchange, and still serve afterwards."""
    (endpoint,) = [e for e in endpoints if e.name == which]
    port = endpoint.port
    modern = _handshake(port, ssl.TLSVersion.TLSv1_2, "ECDHE+AESGCM")
    assert "GCM" in modern, modern
    assert _handshake(port, ssl.TLSVersion.TLSv1_3, "DEFAULT").startswith("TLS_")
    # asyncio's TLS transport closes without flushing the server's alert, so the
    # client sees either the alert or the close; a client unable to offer the protocol
    # or the cipher would fail before sending anything (NO_PROTOCOLS_AVAILABLE,
    # NO_CIPHERS_AVAILABLE) and not pass here.
    server_refused = {
        "refused: TLSV1_ALERT_PROTOCOL_VERSION",
        "refused: SSLV3_ALERT_HANDSHAKE_FAILURE",
        "refused: UNEXPECTED_EOF_WHILE_READING",
    }
    for version in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
        assert _handshake(port, version, "ALL") in server_refused, version
    # CBC with SHA-1, and RSA key exchange without forward secrecy.
    for legacy in ("ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA", "AES128-GCM-SHA256"):
        outcome = _handshake(port, ssl.TLSVersion.TLSv1_2, legacy)
        assert outcome in server_refused, (legacy, outcome)
    # The server survived all of that.
    assert "GCM" in _handshake(port, ssl.TLSVersion.TLSv1_2, "ECDHE+AESGCM")
