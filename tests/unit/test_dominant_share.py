"""NodeConsolidation's fill as the dominant share over the listed resources."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from schedpolicy.core.api import SpecError, parse_spec
from schedpolicy.core.consolidation.api import NodeConsolidationSignal
from schedpolicy.core.consolidation.fill import amount, node_fill
from schedpolicy.core.deletion_cost.api import DeletionCost
from schedpolicy.core.deletion_cost.costs import decide
from schedpolicy.core.deletion_cost.signals.base import CostInputs
from schedpolicy.view.cluster import ClusterView, node_record, pod_record
from schedpolicy.view.deletion_cost import decisions

NOW = datetime(2026, 12, 2, tzinfo=UTC)
GPU = "nvidia.com/gpu"
CPU_NODE = {"cpu": 16_000, "memory": 64 * 2**30 * 1000}
GPU_NODE = {"cpu": 96_000, "memory": 768 * 2**30 * 1000, GPU: 8_000}


def consolidation(resources: list[str], points: int = 800) -> DeletionCost:
    signal = {"type": "NodeConsolidation", "nodeConsolidation": {"points": points}}
    signal["nodeConsolidation"]["resources"] = resources  # type: ignore[index]
    return DeletionCost.model_validate({"signals": [signal], "bucket": 1})


@pytest.mark.parametrize(
    ("case", "resources", "allocatable", "requested", "points", "dominant", "words"),
    [
        ("default is cpu alone", ["cpu"], GPU_NODE, {"cpu": 48_000, GPU: 8_000}, 400, "cpu", ()),
        ("gpu fill ignores cpu", [GPU], GPU_NODE, {"cpu": 90_000, GPU: 1_000}, 100, GPU, ()),
        (
            "the larger share wins",
            ["cpu", GPU],
            GPU_NODE,
            {"cpu": 24_000, GPU: 6_000},
            600,
            GPU,
            ("cpu 24000m of 96000m (0.25)", "nvidia.com/gpu 6 of 8 (0.75)", "gpu dominates"),
        ),
        (
            "a CPU node with the GPU listed: the GPU is skipped",
            ["cpu", GPU],
            CPU_NODE,
            {"cpu": 4_000},
            200,
            "cpu",
            ("nvidia.com/gpu not advertised (skipped)", "cpu dominates"),
        ),
        (
            "a CPU node and only the GPU listed: empty",
            [GPU],
            CPU_NODE,
            {"cpu": 16_000},
            0,
            None,
            ("advertises none of nvidia.com/gpu; treated as empty",),
        ),
        (
            "a GPU node whose GPUs are not allocatable (device plugin down)",
            [GPU],
            {**GPU_NODE, GPU: 0},
            {"cpu": 1_000},
            0,
            None,
            ("advertises none of nvidia.com/gpu",),
        ),
        (
            "a tie goes to the first listed, and says so",
            [GPU, "cpu"],
            GPU_NODE,
            {"cpu": 48_000, GPU: 4_000},
            400,
            GPU,
            ("nvidia.com/gpu dominates, tied with cpu",),
        ),
        ("overcommitted counts as full", [GPU], GPU_NODE, {GPU: 9_000}, 800, GPU, ()),
        (
            "memory in bytes",
            ["memory"],
            GPU_NODE,
            {"memory": 192 * 2**30 * 1000},
            200,
            "memory",
            ("memory 192Gi of 768Gi (0.25)",),
        ),
        ("an idle node", [GPU, "cpu"], GPU_NODE, {}, 0, GPU, ("fill 0.00",)),
    ],
)
def test_dominant_share(
    case: str,
    resources: list[str],
    allocatable: dict[str, int],
    requested: dict[str, int],
    points: int,
    dominant: str | None,
    words: tuple[str, ...],
) -> None:
    inputs = CostInputs(node_name="g1", allocatable=allocatable, requested=requested)
    decision = decide(consolidation(resources), inputs, NOW)
    signal = decision.signals[0]
    assert signal.points == points, case
    assert signal.fill is not None
    assert signal.fill.dominant == dominant, case
    assert [s.resource for s in signal.fill.shares] == resources
    for needle in words:
        assert needle in signal.detail, (case, signal.detail)


def test_cpu_alone_scores_exactly_as_before() -> None:
    # The points of the CPU-only fill, for every fill a 4-core node can have in whole
    # millicores, equal the old formula floor(points x used / allocatable).
    spec = DeletionCost.model_validate(
        {"signals": [{"type": "NodeConsolidation", "nodeConsolidation": {"points": 700}}]}
    )
    for used in range(0, 4_200, 7):
        inputs = CostInputs(node_name="n", allocatable={"cpu": 4_000}, requested={"cpu": used})
        assert decide(spec, inputs, NOW).signals[0].points == 700 * min(used, 4_000) // 4_000


def test_an_unscheduled_pod_has_no_fill() -> None:
    decision = decide(consolidation([GPU]), CostInputs(), NOW)
    assert (decision.signals[0].points, decision.signals[0].fill) == (0, None)


def test_node_fill_never_divides_by_a_negative_allocatable() -> None:
    found = node_fill(["cpu"], {"cpu": -5}, {"cpu": 1})
    assert (found.dominant, found.fill) == (None, Fraction(0))


@pytest.mark.parametrize(
    ("resource", "milli", "shown"),
    [
        ("cpu", 1500, "1500m"),
        (GPU, 3000, "3"),
        ("memory", 8 * 2**30 * 1000, "8Gi"),
        ("memory", 1000 * 1000, "1000"),
        ("hugepages-2Mi", 4 * 2**20 * 1000, "4Mi"),
        (GPU, 500, "500m"),
    ],
)
def test_amounts_read_as_kubectl_shows_them(resource: str, milli: int, shown: str) -> None:
    assert amount(resource, milli) == shown


# ---- what the view counts as requested ------------------------------------------------


def gpu_node(name: str = "g1", gpus: str = "8") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "96", "memory": "768Gi", GPU: gpus},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def gpu_pod(uid: str, spec: dict[str, Any], owner: str = "ReplicaSet") -> dict[str, Any]:
    return {
        "metadata": {
            "name": uid,
            "namespace": "ml",
            "uid": uid,
            "ownerReferences": [{"kind": owner, "name": "o", "uid": "rs1", "controller": True}],
        },
        "spec": {"nodeName": "g1", **spec},
        "status": {"phase": "Running"},
    }


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> Any:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources}


@pytest.mark.parametrize(
    ("case", "spec", "gpus", "cpu"),
    [
        ("requests", {"containers": [container({GPU: "2", "cpu": "4"})]}, 2, 4_000),
        (
            "limits only: the apiserver defaults requests to them",
            {"containers": [container(None, {GPU: "1"})]},
            1,
            0,
        ),
        (
            "two app containers add up",
            {"containers": [container({GPU: "1"}), container({GPU: "2"})]},
            3,
            0,
        ),
        (
            "an init container's peak above the app's counts",
            {
                "initContainers": [container({GPU: "4", "cpu": "1"})],
                "containers": [container({GPU: "1", "cpu": "2"})],
            },
            4,
            2_000,
        ),
        (
            "a sidecar runs beside the app and adds to it",
            {
                "initContainers": [{**container({GPU: "1"}), "restartPolicy": "Always"}],
                "containers": [container({GPU: "2"})],
            },
            3,
            0,
        ),
        (
            "pod overhead adds",
            {"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m"}},
            0,
            1_250,
        ),
    ],
)
def test_requests_follow_the_schedulers_rules(
    case: str, spec: dict[str, Any], gpus: int, cpu: int
) -> None:
    record = pod_record(gpu_pod("p1", spec))
    assert (record.requests.get(GPU, 0), record.requests.get("cpu", 0)) == (gpus * 1000, cpu), case


def test_the_view_sums_each_resource_and_skips_daemonsets_and_finished_pods() -> None:
    view = ClusterView()
    view.upsert_node(gpu_node())
    view.upsert_pod(gpu_pod("a", {"containers": [container({GPU: "2", "cpu": "8"})]}))
    view.upsert_pod(gpu_pod("b", {"containers": [container(None, {GPU: "1"})]}))
    view.upsert_pod(gpu_pod("ds", {"containers": [container({GPU: "1"})]}, owner="DaemonSet"))
    done = gpu_pod("done", {"containers": [container({GPU: "4"})]})
    done["status"]["phase"] = "Succeeded"
    view.upsert_pod(done)
    assert dict(view.requested("g1")) == {GPU: 3_000, "cpu": 8_000}
    _, affected = view.upsert_pod(gpu_pod("b", {"containers": [container(None, {GPU: "2"})]}))
    assert affected.nodes == {"g1"}
    view.remove_pod("a")
    assert dict(view.requested("g1")) == {GPU: 2_000}


def test_explain_shows_the_gpu_share_of_a_pod() -> None:
    view = ClusterView()
    view.upsert_node(gpu_node())
    policy = {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "gpu", "uid": "p1", "generation": 1},
        "spec": {
            "deletionCost": {
                "bucket": 1,
                "signals": [
                    {
                        "type": "NodeConsolidation",
                        "nodeConsolidation": {"points": 800, "resources": [GPU, "cpu"]},
                    }
                ],
            }
        },
    }
    view.upsert_policy(policy)
    for uid in ("a", "b"):
        view.upsert_pod(gpu_pod(uid, {"containers": [container({GPU: "1", "cpu": "1"})]}))
    result = decisions.pod_cost(view, view.pods["a"], NOW)
    assert result.decision is not None
    assert result.decision.final == 200
    signal = result.decision.signals[0]
    assert signal.fill is not None
    assert signal.fill.dominant == GPU
    assert "nvidia.com/gpu 2 of 8 (0.25), cpu 2000m of 96000m (0.02)" in signal.detail


def test_a_gpu_node_losing_its_gpus_changes_its_pods_costs() -> None:
    view = ClusterView()
    view.upsert_node(gpu_node())
    _, affected = view.upsert_node(gpu_node(gpus="0"))
    assert affected.nodes == {"g1"}
    assert node_record(gpu_node(gpus="0")).allocatable_gpus == 0


@pytest.mark.parametrize(
    ("resources", "error"),
    [
        (["cpu", "cpu"], "resources must not repeat"),
        (["GPU cards"], "is not a resource name"),
        (["example.com/" + "x" * 64], "is not a resource name"),
        (["a", "b", "c", "d", "e"], "at most 4"),
        ([], "at least 1"),
    ],
)
def test_bad_resource_lists_are_refused_naming_the_field(resources: list[str], error: str) -> None:
    spec = {
        "deletionCost": {
            "signals": [
                {"type": "NodeConsolidation", "nodeConsolidation": {"resources": resources}}
            ]
        }
    }
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    assert "spec.deletionCost.signals[0].nodeConsolidation.resources" in str(err.value)
    assert error in str(err.value)


@pytest.mark.parametrize(
    "resources",
    [
        ["cpu"],
        ["nvidia.com/gpu"],
        ["memory", "hugepages-2Mi"],
        ["amd.com/gpu", "cpu", "memory", "x.io/y_z"],
    ],
)
def test_any_resource_name_is_accepted(resources: list[str]) -> None:
    assert NodeConsolidationSignal(resources=resources).resources == resources
