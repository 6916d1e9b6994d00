"""A NodePool checked against Karpenter's CRD before any cluster starts, with the apiserver's
own wording."""

from __future__ import annotations

import re
from typing import Any

import pytest

from localcluster import crd_schema, karpenter
from localcluster.binaries import TOOLS

# The shape of Karpenter's NodePool schema where the harness sets fields.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["template"],
            "properties": {
                "weight": {"type": "integer", "minimum": 1, "maximum": 100},
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "disruption": {
                    "type": "object",
                    "properties": {
                        "consolidationPolicy": {
                            "type": "string",
                            "enum": ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"],
                        },
                        "consolidateAfter": {
                            "type": "string",
                            "pattern": "^(([0-9]+(s|m|h))+|Never)$",
                        },
                        "budgets": {
                            "type": "array",
                            "maxItems": 2,
                            "items": {"type": "object", "required": ["nodes"], "properties": {
                                "nodes": {"type": "string"}}},
                        },
                    },
                },
            },
        },
    },
}  # fmt: skip


def pool(**disruption: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu", "labels": {"a": "b"}},
        "spec": {"weight": 10, "template": {"anything": 1}, "disruption": disruption},
    }


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            pool(consolidationPolicy="WhenIdle"),
            'spec.disruption.consolidationPolicy: Unsupported value: "WhenIdle": supported'
            ' values: "WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"',
        ),
        (
            pool(consolidateAfter="1.5s"),
            'spec.disruption.consolidateAfter: Invalid value: "1.5s":'
            " spec.disruption.consolidateAfter in body should match",
        ),
        (pool(budgets=[{}]), "spec.disruption.budgets[0].nodes: Required value"),
        (pool(budgets=[{"nodes": "1"}] * 3), "spec.disruption.budgets: Too many: 3"),
        (pool(extra=1), 'spec.disruption: unknown field "extra"'),
        ({**pool(), "spec": {"weight": 0, "template": {}}}, "spec.weight: Invalid value: 0"),
        (
            {**pool(), "spec": {"weight": "1", "template": {}}},
            'spec.weight: Invalid value: "string": spec.weight in body must be of type integer',
        ),
        ({**pool(), "spec": {}}, "spec.template: Required value"),
    ],
)
def test_what_the_crd_refuses_is_refused_with_the_apiservers_words(
    doc: dict[str, Any], message: str
) -> None:
    with pytest.raises(crd_schema.SchemaError) as refused:
        crd_schema.check(doc, SCHEMA)
    assert str(refused.value).startswith(message)


def test_what_the_crd_takes_passes() -> None:
    crd_schema.check(pool(consolidationPolicy="WhenEmpty", consolidateAfter="15s"), SCHEMA)


def test_the_harness_refuses_a_pool_karpenters_own_crd_refuses() -> None:
    if not (karpenter.crd_dir() / "karpenter.sh_nodepools.yaml").exists():
        pytest.skip("Karpenter's CRDs are built by `bash tools/build.sh karpenter`")
    for policy in ("WhenEmpty", "WhenEmptyOrUnderutilized"):
        karpenter.manifests(karpenter.KarpenterOptions(gpu_consolidation=policy))
    with pytest.raises(
        karpenter.KarpenterConfigError, match="NodePool gpu: Karpenter's CRD refuses"
    ):
        karpenter.manifests(karpenter.KarpenterOptions(gpu_consolidation="WhenIdle"))


def test_a_replay_runs_karpenters_timers_and_batches_on_its_clock() -> None:
    options = karpenter.KarpenterOptions(time_scale=20, registration_delay=4.5)
    env = karpenter.environment(options, karpenter.INSTANCE_TYPES, karpenter.INSTANCE_TYPES, 1, 2)
    assert env[karpenter.TIME_SCALE_ENV] == "20"
    assert (env["BATCH_IDLE_DURATION"], env["BATCH_MAX_DURATION"]) == ("50ms", "500ms")
    plain = karpenter.environment(
        karpenter.KarpenterOptions(), karpenter.INSTANCE_TYPES, karpenter.INSTANCE_TYPES, 1, 2
    )
    assert karpenter.TIME_SCALE_ENV not in plain
    assert plain["BATCH_MAX_DURATION"] == "3s"


def test_every_timer_the_report_names_is_one_the_patch_scales() -> None:
    """The report's list of Karpenter's scaled timers and tools/karpenter/replay-timers.patch
    say the same: each named constant is defined through replaytime in the patch, in its
    package, and the patch scales nothing the list leaves out."""
    patch = (TOOLS / "karpenter" / "replay-timers.patch").read_text()
    scaled = set(re.findall(r"^\+\s*(?:var )?(\w+) = replay(?:time\.Scaled|Scaled)\(", patch, re.M))
    assert scaled == {name for name, *_ in karpenter.REPLAY_TIMERS}
    for name, package, seconds, _ in karpenter.REPLAY_TIMERS:
        assert f"pkg/{package}/" in patch, name
        assert seconds > 0
