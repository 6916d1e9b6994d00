from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest

from schedpolicy.core.api import parse_spec
from schedpolicy.core.placement.hints import decide, gpu_request
from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.wellknown import HINTS_ANNOTATION

MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"
GPU_PLACEMENT = {"gpu": {"models": ["A100", "H100"], "minMemoryMiB": 40960}}
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# The verified table's A100 and H100 types with at least 40960 MiB a GPU.
A100_H100_TYPES = ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5.4xlarge"]
LAUNCH = [INSTANCE_TYPE, "karpenter.sh/nodepool", MODEL]


def policy(**placement: Any) -> Policy:
    return Policy(name="p", generation=3, spec=parse_spec({"placement": placement}))


def pod(
    gpus: str | None = None, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus} if gpus else {}
    return {
        "metadata": {"labels": labels or {"app": "train", "pod-template-hash": "abc"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}], **spec},
    }


def applied(p: dict[str, Any], decision: Any) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(p), decision.json_patch(p))
    return result


@pytest.mark.parametrize(
    ("spec", "gpus"),
    [
        ({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, 2),
        ({"containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}, 1),
        (
            {
                "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
                "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            4,
        ),
        (
            {
                "initContainers": [
                    {
                        "name": "s",
                        "restartPolicy": "Always",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
                "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            2,
        ),
        ({"containers": [{"name": "a"}]}, 0),
    ],
)
def test_effective_gpu_request(spec: dict[str, Any], gpus: int) -> None:
    assert gpu_request(spec) == gpus


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (None, "schedpolicy-scheduler"),
        ("", "schedpolicy-scheduler"),
        ("default-scheduler", "schedpolicy-scheduler"),
        ("other", "other"),
    ],
)
def test_scheduler_name(current: str | None, expected: str) -> None:
    p = pod() if current is None else pod(schedulerName=current)
    assert applied(p, decide(policy(), p))["spec"].get("schedulerName") == expected


def test_a_pod_for_another_scheduler_is_left_alone() -> None:
    p = pod("1", schedulerName="other")
    decision = decide(policy(**GPU_PLACEMENT, avoidGPUNodes=True), p)
    assert decision.changes == {}
    assert "chosen explicitly" in decision.explanation[0]


def test_gpu_affinity_for_a_fresh_pod() -> None:
    p = pod("1")
    out = applied(p, decide(policy(**GPU_PLACEMENT), p))
    terms = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": MODEL, "operator": "In", "values": ["A100", "H100"]},
                {"key": MEMORY, "operator": "Gt", "values": ["40959"]},
            ]
        },
        # What Karpenter can launch: the label term names a key no NodePool defines.
        {
            "matchExpressions": [
                {"key": INSTANCE_TYPE, "operator": "In", "values": A100_H100_TYPES},
                {"key": "karpenter.sh/nodepool", "operator": "Exists"},
                {"key": MODEL, "operator": "DoesNotExist"},
            ]
        },
    ]


def test_a_model_no_instance_type_holds_gets_the_label_term_alone() -> None:
    p = pod("1")
    gpu = {"gpu": {"models": ["MI300X"], "minMemoryMiB": 1024}}
    decision = decide(policy(**gpu), p)
    terms = applied(p, decision)["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [[e["key"] for e in t["matchExpressions"]] for t in terms] == [[MODEL, MEMORY]]
    assert any("cannot launch a node" in line for line in decision.explanation)


def test_gpu_affinity_is_anded_into_every_existing_term() -> None:
    existing = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "rack", "operator": "Exists"}]},
                ]
            }
        }
    }
    p = pod("1", affinity=existing)
    out = applied(p, decide(policy(**GPU_PLACEMENT), p))
    terms = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [[e["key"] for e in t["matchExpressions"]] for t in terms] == [
        ["zone", MODEL, MEMORY],
        ["rack", MODEL, MEMORY],
        ["zone", *LAUNCH],
        ["rack", *LAUNCH],
    ]


def test_gpu_affinity_skipped_when_the_pod_constrains_the_keys() -> None:
    existing = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": MODEL, "operator": "In", "values": ["L4"]}]}
                ]
            }
        }
    }
    p = pod("1", affinity=existing)
    decision = decide(policy(**GPU_PLACEMENT), p)
    assert "spec.affinity" not in decision.changes
    assert any("own required terms constrain" in line for line in decision.explanation)


ZONE_IN_A = {"key": "zone", "operator": "In", "values": ["a"]}
HOST_FIELD = {"key": "metadata.name", "operator": "In", "values": ["n1"]}


def _required(terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


@pytest.mark.parametrize(
    ("gpus", "affinity", "terms"),
    [
        # (GPUs requested, the pod's own affinity, the required terms it ends with: each
        # term as (matchExpressions keys, matchFields keys); None: affinity left unchanged)
        pytest.param("1", None, [([MODEL, MEMORY], []), (LAUNCH, [])], id="fresh"),
        pytest.param(
            "1",
            _required([{"matchExpressions": [ZONE_IN_A]}, {"matchExpressions": [ZONE_IN_A]}]),
            [
                (["zone", MODEL, MEMORY], []),
                (["zone", MODEL, MEMORY], []),
                (["zone", *LAUNCH], []),
                (["zone", *LAUNCH], []),
            ],
            id="anded-into-every-term",
        ),
        pytest.param(
            "1",
            _required([{"matchFields": [HOST_FIELD]}]),
            [([MODEL, MEMORY], ["metadata.name"]), (LAUNCH, ["metadata.name"])],
            id="term-with-only-matchFields",
        ),
        pytest.param(
            "1",
            {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
            [([MODEL, MEMORY], []), (LAUNCH, [])],
            id="other-affinity-kinds-kept",
        ),
        pytest.param(
            "1",
            _required([{"matchExpressions": [{"key": MEMORY, "operator": "Gt", "values": ["1"]}]}]),
            None,
            id="pod-constrains-memory",
        ),
        pytest.param("0", None, None, id="no-gpus"),
    ],
)
def test_required_gpu_terms(
    gpus: str, affinity: dict[str, Any] | None, terms: list[tuple[list[str], list[str]]] | None
) -> None:
    p = pod(gpus if gpus != "0" else None, **({"affinity": affinity} if affinity else {}))
    decision = decide(policy(**GPU_PLACEMENT), p)
    out = applied(p, decision)
    if terms is None:
        assert out["spec"].get("affinity") == affinity
        return
    stored = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [
        (
            [e["key"] for e in t.get("matchExpressions", [])],
            [f["key"] for f in t.get("matchFields", [])],
        )
        for t in stored
    ] == terms
    for key, value in (affinity or {}).items():
        if key != "nodeAffinity":
            assert out["spec"]["affinity"][key] == value
    assert applied(out, decide(policy(**GPU_PLACEMENT), out)) == out  # idempotent


@pytest.mark.parametrize("weight", [0, 101])
def test_preference_weights_outside_1_to_100_are_refused(weight: int) -> None:
    with pytest.raises(ValueError, match=r"placement\.capacityType\.weight"):
        parse_spec({"placement": {"capacityType": {"prefer": "spot", "weight": weight}}})
    with pytest.raises(ValueError, match=r"placement\.instanceTypes\[0\]\.weight"):
        parse_spec({"placement": {"instanceTypes": [{"prefix": "p5", "weight": weight}]}})


def test_no_gpu_affinity_for_cpu_pods() -> None:
    decision = decide(policy(**GPU_PLACEMENT), pod())
    assert "spec.affinity" not in decision.changes


def test_capacity_type_prefers_both_label_schemes() -> None:
    p = pod()
    out = applied(p, decide(policy(capacityType={"prefer": "spot", "weight": 40}), p))
    prefs = out["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert prefs == [
        {
            "weight": 40,
            "preference": {
                "matchExpressions": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                ]
            },
        },
        {
            "weight": 40,
            "preference": {
                "matchExpressions": [
                    {"key": "eks.amazonaws.com/capacityType", "operator": "In", "values": ["SPOT"]}
                ]
            },
        },
    ]


def test_instance_type_prefixes_expand_to_known_types() -> None:
    p = pod()
    known = ["p5.48xlarge", "p4de.24xlarge", "p4d.24xlarge", "m5.xlarge"]
    decision = decide(
        policy(instanceTypes=[{"prefix": "p4d", "weight": 20}, {"prefix": "g6e", "weight": 5}]),
        p,
        instance_types=known,
    )
    prefs = applied(p, decision)["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert prefs == [
        {
            "weight": 20,
            "preference": {
                "matchExpressions": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["p4d.24xlarge"],
                    }
                ]
            },
        }
    ]
    assert any("g6e" in line and "no node" in line for line in decision.explanation)


@pytest.mark.parametrize(("gpus", "avoids"), [(None, True), ("1", False)])
def test_avoid_gpu_nodes_only_for_pods_without_gpus(gpus: str | None, avoids: bool) -> None:
    p = pod(gpus)
    out = applied(p, decide(policy(avoidGPUNodes=True), p))
    prefs = (
        (out["spec"].get("affinity") or {})
        .get("nodeAffinity", {})
        .get("preferredDuringSchedulingIgnoredDuringExecution", [])
    )
    assert bool(prefs) is avoids
    if avoids:
        assert prefs[0]["weight"] == 100
        assert {e["operator"] for e in prefs[0]["preference"]["matchExpressions"]} == {
            "DoesNotExist"
        }


@pytest.mark.parametrize(
    ("owner", "labels", "selector"),
    [
        ("ReplicaSet", {"app": "train", "pod-template-hash": "abc"}, {"app": "train"}),
        (
            "StatefulSet",
            {
                "app": "db",
                "controller-revision-hash": "db-7f9",
                "statefulset.kubernetes.io/pod-name": "db-0",
                "apps.kubernetes.io/pod-index": "0",
            },
            {"app": "db"},
        ),
        (
            "Job",
            {
                "job-name": "etl",
                "batch.kubernetes.io/job-name": "etl",
                "batch.kubernetes.io/job-completion-index": "3",
            },
            {"job-name": "etl", "batch.kubernetes.io/job-name": "etl"},
        ),
    ],
)
def test_zone_spread_selects_the_owners_pods_not_one_pod(
    owner: str, labels: dict[str, str], selector: dict[str, str]
) -> None:
    p = pod(labels=labels)
    out = applied(p, decide(policy(zoneSpread={"maxSkew": 2}), p, owner_kind=owner))
    assert out["spec"]["topologySpreadConstraints"] == [
        {
            "maxSkew": 2,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        }
    ]


def test_daemonset_pods_are_left_alone() -> None:
    p = pod(labels={"app": "agent", "controller-revision-hash": "x"})
    decision = decide(
        policy(schedulerName="packer", zoneSpread={}, avoidGPUNodes=True), p, owner_kind="DaemonSet"
    )
    assert decision.changes == {}
    assert "DaemonSet" in decision.explanation[0]


def test_zone_spread_kept_when_the_pod_has_one_and_skipped_without_owner() -> None:
    own = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
        }
    ]
    assert (
        "spec.topologySpreadConstraints"
        not in decide(
            policy(zoneSpread={}), pod(topologySpreadConstraints=own), owner_kind="ReplicaSet"
        ).changes
    )
    assert "spec.topologySpreadConstraints" not in decide(policy(zoneSpread={}), pod()).changes


FULL = dict(
    gpu=GPU_PLACEMENT["gpu"],
    capacityType={"prefer": "on-demand", "weight": 70},
    instanceTypes=[{"prefix": "p5", "weight": 30}],
    avoidGPUNodes=True,
    zoneSpread={"maxSkew": 1},
)


@pytest.mark.parametrize("gpus", [None, "1"])
def test_idempotent_and_recorded(gpus: str | None) -> None:
    pol = policy(**FULL)
    p = pod(gpus)
    first = applied(p, decide(pol, p, owner_kind="ReplicaSet", instance_types=["p5.48xlarge"]))
    again = decide(pol, first, owner_kind="ReplicaSet", instance_types=["p5.48xlarge"])
    assert again.changes == {}
    assert applied(first, again) == first
    record = json.loads(first["metadata"]["annotations"][HINTS_ANNOTATION])
    assert record["policy"] == "p"
    assert record["generation"] == 3
    assert "schedulerName" in record["injected"]


def test_patch_adds_the_annotations_map_when_absent() -> None:
    p = pod("1")
    ops = decide(policy(**GPU_PLACEMENT), p).json_patch(p)
    assert {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {HINTS_ANNOTATION: ops[-1]["value"][HINTS_ANNOTATION]},
    } == ops[-1]
    annotated = pod("1")
    annotated["metadata"]["annotations"] = {"x": "y"}
    assert (
        decide(policy(**GPU_PLACEMENT), annotated).json_patch(annotated)[-1]["path"]
        == "/metadata/annotations/schedpolicy.io~1hints"
    )
