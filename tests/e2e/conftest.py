"""Fixtures for tests against the real local control plane.

The control plane comes up once per session. If $KUBECONFIG points at the
kubeconfig of a running local cluster (from `make cluster-up`), that cluster is
reused and left running; otherwise a fresh one is started under
.cluster/pytest/ and stopped at the end. Each test gets its own namespace.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from localcluster import LocalCluster, binaries
from localcluster.binaries import REPO
from localcluster.operator_process import OperatorProcess, running
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube
from tests.e2e.pools import Pool

# The compatibility lane's cluster has a directory of its own, so a lane never reuses the
# other's cluster.
PYTEST_WORKDIR = REPO / ".cluster" / (f"pytest-{binaries.lane()}" if binaries.lane() else "pytest")


def _reusable(kubeconfig: str | None) -> LocalCluster | None:
    if not kubeconfig:
        return None
    workdir = Path(kubeconfig).resolve().parent
    if not (workdir / "state.json").exists():
        return None
    cluster = LocalCluster(workdir)
    return cluster if cluster.healthy() else None


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    reused = _reusable(os.environ.get("KUBECONFIG"))
    if reused is not None:
        yield reused
        return
    fresh = LocalCluster(PYTEST_WORKDIR)
    fresh.up()
    try:
        yield fresh
    finally:
        fresh.down()


@pytest.fixture(scope="session")
async def api(cluster: LocalCluster) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(cluster.kubeconfig), client_configuration=cfg, persist_config=False
    )
    async with client.ApiClient(configuration=cfg) as api_client:
        yield api_client


@pytest.fixture
async def kube(cluster: LocalCluster) -> AsyncIterator[Kube]:
    """The operator's own client, with admin credentials, for read-side helpers like explain."""
    made = await Kube.connect(Credentials(kubeconfig=str(cluster.kubeconfig)), "e2e")
    yield made
    await made.close()


@pytest.fixture
async def namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    core = client.CoreV1Api(api)
    # Parametrized tests carry `[param]` in their names, which a namespace name may not.
    short = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower().replace("_", "-"))
    short = short[:40].strip("-")
    name = f"t-{short}-{uuid.uuid4().hex[:5]}"
    await core.create_namespace(
        {"metadata": {"name": name, "labels": {"schedpolicy.io/e2e": "true"}}}
    )
    # Pods are refused until the serviceaccount controller has made `default`.
    for _ in range(100):
        accounts = await core.list_namespaced_service_account(name)
        if any(sa.metadata.name == "default" for sa in accounts.items):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"serviceaccount {name}/default was never created")
    yield name
    await core.delete_namespace(name)


@pytest.fixture(scope="session")
def crd(cluster: LocalCluster) -> str:
    """The SchedulingPolicy CRD from crds/, installed and Established."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    name = "schedulingpolicies.schedpolicy.io"
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    # Discovery lags a moment behind Established; kubectl needs it to resolve the kind.
    for _ in range(50):
        if "schedulingpolicies" in cluster.kubectl("api-resources", "--api-group=schedpolicy.io"):
            break
        time.sleep(0.2)
    return name


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, crd: str) -> Iterator[OperatorProcess]:
    """An operator process from this checkout, one per test module, as its own user."""
    with running(cluster, "--verbose") as proc:
        yield proc


@pytest.fixture
def policies(cluster: LocalCluster, crd: str) -> Iterator[list[str]]:
    """Names appended here are SchedulingPolicies the test made; they are deleted after it."""
    created: list[str] = []
    yield created
    for name in created:
        cluster.kubectl("delete", "schedulingpolicy", name, "--ignore-not-found", "--wait=false")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    if exitstatus not in (0, 5):
        for workdir in (PYTEST_WORKDIR, REPO / ".cluster" / "local"):
            if (workdir / "logs").exists():
                terminalreporter.write_line(
                    f"control-plane logs (one per process): {workdir / 'logs'}"
                )


@pytest.fixture
async def pool(cluster: LocalCluster, namespace: str) -> AsyncIterator[Pool]:
    """Fake nodes for one test, tagged with its own label; deleted after it."""
    made = Pool(cluster, namespace)
    yield made
    await asyncio.to_thread(made.cleanup)
