"""B7's smoke: an hour of ServeGen's load, one run of three lanes (Karpenter alone, Karpenter
with its PodDeletionCostManagement gate, and the product), on real clusters with Karpenter on
the replay's clock. The full benchmark (`make bench ONLY=B7`) is not part of `make test`; this
shows that its parts still work together and that each lane is the lane it says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.serving import run
from localcluster import binaries
from localcluster.binaries import REPO

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if binaries.lane():
        pytest.skip("Karpenter runs against the target Kubernetes only")
    out: Path = tmp_path_factory.mktemp("b7")
    return run.run_b7("smoke", out, REPO / ".cluster" / "pytest-b7", plot=False)


def test_every_lane_runs_the_same_day_and_binds_every_replica_it_asks_for(
    smoke: dict[str, Any],
) -> None:
    """A user reading B7 sees three lanes that served the same load, none leaving a replica
    Pending at the end, and node-hours no lower than the offline bound allows."""
    runs = {r["lane"]: r for r in smoke["runs"]}
    assert set(runs) == set(run.SMOKE_LANES)
    for lane, r in runs.items():
        assert r["gpu_hours_needed"] == smoke["gpu_hours_needed"], lane
        assert all(v["never_bound"] == 0 for v in r["pending_by_gpus"].values()), (lane, r)
        assert r["gpu_hours_provisioned"] >= smoke["gpu_hours_needed"], (lane, r)
        assert r["gpu_node_hours"] >= smoke["offline_bound"]["gpu_node_hours"], (lane, r)
        assert r["nodes_launched"] + r["nodes_at_start"] > 0, lane


def test_only_the_product_hints_and_only_the_product_and_the_gate_cost_pods(
    smoke: dict[str, Any],
) -> None:
    """What the apiserver stored: the product's pods name our scheduler through the webhook
    and carry a deletion cost; with Karpenter's gate on, Karpenter itself writes costs (its
    60 s refresh, divided by the replay's 20, comes round many times in the hour), on pods that
    keep the default scheduler; Karpenter alone's pods carry none."""
    pods = {r["lane"]: r["pods"] for r in smoke["runs"]}
    assert set(pods["product"]["by_scheduler"]) == {"schedpolicy-scheduler"}, pods
    # A replica created in the run's last seconds may not have been costed yet.
    assert pods["product"]["costed"] >= 0.9 * pods["product"]["total"], pods
    assert set(pods["karpenter-gate"]["by_scheduler"]) == {"default-scheduler"}, pods
    assert pods["karpenter-gate"]["costed"] >= 0.5 * pods["karpenter-gate"]["total"], pods
    assert set(pods["karpenter-alone"]["by_scheduler"]) == {"default-scheduler"}, pods
    assert pods["karpenter-alone"]["costed"] == 0, pods
