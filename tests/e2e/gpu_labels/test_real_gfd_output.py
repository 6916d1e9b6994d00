"""GPU node labels from real GPU Feature Discovery output that the topology file never shows:
bytes for mebibytes, shared and MIG devices, unknown names. Labelled right or not at all."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster import LocalCluster
from localcluster.operator_process import OperatorProcess
from schedpolicy.app import explain
from schedpolicy.shell.kube import Kube
from tests.e2e.conftest import (
    GFD_MEMORY,
    MEMORY,
    MODEL,
    PRODUCT,
    REFUSALS,
    gpu_node,
    label_policy,
    node_events,
    node_state,
)
from tests.e2e.kubeobjects import wait_until
from tests.e2e.pools import Pool, apply

pytestmark = pytest.mark.e2e
REPLICAS, SHARING = "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy"


async def test_real_gfd_output_labels_right_or_not_at_all(
    cluster: LocalCluster,
    kube: Kube,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
) -> None:
    """Real GPU Feature Discovery output, one node per class of issue 14 (units, sharing,
    names, fallbacks, false alarms, gaps): each node is labelled right or not at all; a
    refused node gets a GPULabelRefused Warning naming why, counted once per refusal in
    schedpolicy_gpu_label_refusals_total, and `schedpolicy explain node` names the reason."""
    nodes = {
        # GFD v0.6.x published bytes; this one is time-sliced 8 ways as well.
        "t4-bytes": gpu_node(
            pool,
            "t4-bytes",
            "g4dn.xlarge",
            "8",
            "gfd",
            **{PRODUCT: "Tesla-T4-SHARED", GFD_MEMORY: "16106127360", REPLICAS: "8"},
        ),
        "a100-mps": gpu_node(
            pool,
            "a100-mps",
            "p4d.24xlarge",
            "32",
            "gfd",
            **{
                PRODUCT: "NVIDIA-A100-SXM4-40GB-SHARED",
                GFD_MEMORY: "40536",
                REPLICAS: "4",
                SHARING: "mps",
            },
        ),
        "rtx-ada": gpu_node(
            pool,
            "rtx-ada",
            "workstation",
            "2",
            "gfd",
            **{PRODUCT: "NVIDIA-RTX-6000-Ada-Generation", GFD_MEMORY: "49140"},
        ),
        "unnamed": gpu_node(
            pool,
            "unnamed",
            "workstation",
            "4",
            "gfd",
            **{PRODUCT: "NVIDIA-Graphics-Device", GFD_MEMORY: "189471"},
        ),
        "mig-invalid": gpu_node(
            pool,
            "mig-invalid",
            "p4de.24xlarge",
            "8",
            "gfd",
            **{PRODUCT: "NVIDIA-A100-SXM4-80GB-MIG-INVALID", GFD_MEMORY: "0", REPLICAS: "0"},
        ),
        # The rest have the table first.
        "slices": gpu_node(pool, "slices", "p4d.24xlarge", "56", "table"),
        "mig": gpu_node(
            pool,
            "mig",
            "p4d.24xlarge",
            "56",
            "table",
            **{PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", GFD_MEMORY: "4864"},
        ),
        "p5-small": gpu_node(pool, "p5-small", "p5.4xlarge", "1", "table"),
        "b200": gpu_node(pool, "b200", "p6-b200.48xlarge", "8", "table"),
        "p3": gpu_node(pool, "p3", "p3.8xlarge", "4", "table"),
    }
    expected = {
        "t4-bytes": {MODEL: "T4", MEMORY: "15360"},
        "a100-mps": {MODEL: "A100", MEMORY: "10134"},
        "rtx-ada": {MODEL: "RTX-6000-Ada", MEMORY: "49140"},
        "unnamed": {},
        "mig-invalid": {},
        "slices": {},
        "mig": {MODEL: "A100", MEMORY: "4864"},
        "p5-small": {MODEL: "H100", MEMORY: "81920"},
        "b200": {MODEL: "B200", MEMORY: "183359"},
        "p3": {MODEL: "V100", MEMORY: "16384"},
    }
    refused = {
        "unnamed": "unknown-model",
        "mig-invalid": "mig-invalid",
        "slices": "more-devices-than-cards",
    }
    before = {r: operator.metric(REFUSALS, reason=r) or 0.0 for r in set(refused.values())}
    pool.create(*nodes.values())
    name = {k: n.name for k, n in nodes.items()}
    policies.extend([f"gfd-{pool.tag}", f"table-{pool.tag}"])
    apply(
        cluster,
        label_policy(f"gfd-{pool.tag}", pool, "gfd", ["GPUFeatureDiscovery", "InstanceType"]),
    )
    apply(
        cluster,
        label_policy(f"table-{pool.tag}", pool, "table", ["InstanceType", "GPUFeatureDiscovery"]),
    )

    # The refused nodes first: each gets its Warning, which the operator posts before it
    # writes anything for that node.
    for key, reason in refused.items():
        node = name[key]
        events = wait_until(
            lambda node=node: node_events(cluster, node, "GPULabelRefused") or None,  # type: ignore[misc]
            within=60,
            what=f"a GPULabelRefused Event on {key}",
        )
        assert events[0]["type"] == "Warning"
        assert f"refused ({reason})" in events[0]["message"]

    def labelled() -> dict[str, Any] | None:
        states = {k: node_state(cluster, n) for k, n in name.items()}
        return states if all(states[k]["labels"] == v for k, v in expected.items()) else None

    states = wait_until(labelled, within=60, what="the labels of real GFD output")
    # A refused node gets nothing at all: no label, no ownership annotation.
    for key in refused:
        assert states[key]["owned"] is None
        assert states[key]["managed"] == []

    # The MIG node's slices and the T4's ECC-reduced memory are no disagreement with the table.
    assert [k for k in name if node_events(cluster, name[k], "GPUSourcesDisagree")] == []
    assert [
        k for k in name if k not in refused and node_events(cluster, name[k], "GPULabelRefused")
    ] == []

    # Counted once per refusal (the invalid MIG node is refused by both its sources).
    counted = {r: (operator.metric(REFUSALS, reason=r) or 0.0) - before[r] for r in before}
    assert counted == {"unknown-model": 1, "mig-invalid": 2, "more-devices-than-cards": 1}

    # explain names the reason for a node without labels.
    out = await explain.explain_node(kube, name["slices"])
    assert [r["reason"] for r in out["decision"]["refusals"]] == ["more-devices-than-cards"]
    assert "more-devices-than-cards" in explain.render_node(out)
