"""Refusals reach the admin: one GPULabelRefused Event and one count per refusal while it lasts."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from prometheus_client import REGISTRY

from schedpolicy.core.gpu.label_rules import LabelPlan
from schedpolicy.core.gpu.patches import node_label_patch
from schedpolicy.core.wellknown import GFD_MEMORY, GFD_PRODUCT
from schedpolicy.shell.events import Events
from schedpolicy.shell.gpu.label_sync import LabelSync
from schedpolicy.shell.kube import Kube, ObjectRef
from schedpolicy.view import snapshot

POLICY = {
    "apiVersion": "schedpolicy.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {"name": "gpus", "uid": "p-1", "generation": 1},
    "spec": {"nodeLabels": {"gpu": {"sources": ["GPUFeatureDiscovery", "InstanceType"]}}},
}


def node(**labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "uid": "n-1", "resourceVersion": "1", "labels": labels},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}},
    }


def refusals(reason: str) -> float:
    value = REGISTRY.get_sample_value("schedpolicy_gpu_label_refusals_total", {"reason": reason})
    return value or 0.0


def test_a_refusal_is_posted_and_counted_once_while_it_lasts() -> None:
    posted: list[tuple[str, str]] = []

    class Posted(Events):
        async def warn(self, ref: ObjectRef, reason: str, message: str) -> None:
            posted.append((reason, message))

    view = snapshot.build_view(policies=[POLICY])
    sync = LabelSync(Kube.__new__(Kube), view, Posted(Kube.__new__(Kube)))
    invalid = node(**{GFD_PRODUCT: "NVIDIA-A100-SXM4-80GB-MIG-INVALID", GFD_MEMORY: "0"})
    before = refusals("mig-invalid")

    async def see(body: dict[str, Any]) -> None:
        view.upsert_node(body)
        sync.refresh("n1", view.policies())
        await sync.report("n1")

    asyncio.run(see(invalid))
    asyncio.run(see(invalid))  # the same refusal again: nothing new
    assert [r for r, _ in posted] == ["GPULabelRefused"]
    assert "MIG layout" in posted[0][1]
    assert refusals("mig-invalid") == before + 1
    assert sync.counts()[0] == {}

    healthy = node(**{GFD_PRODUCT: "NVIDIA-A100-SXM4-80GB", GFD_MEMORY: "81920"})
    asyncio.run(see(healthy))
    asyncio.run(see(invalid))  # it came back: posted and counted again
    assert [r for r, _ in posted] == ["GPULabelRefused", "GPULabelRefused"]
    assert refusals("mig-invalid") == before + 2


def test_an_echo_that_beats_the_response_does_not_hold_later_writes() -> None:
    """The watch may show our patch before the patch call returns; the next change to the
    node must still be written."""
    view = snapshot.build_view(policies=[POLICY])
    labelled = node(**{GFD_PRODUCT: "NVIDIA-A100-SXM4-80GB", GFD_MEMORY: "81920"})
    view.upsert_node(labelled)
    patches: list[dict[str, Any]] = []

    class EchoFirst:
        async def apply_node_labels(self, name: str, uid: str, plan: LabelPlan) -> str:
            patch = cast(dict[str, Any], node_label_patch(uid, plan))
            patches.append(patch)
            version = str(len(patches) + 1)
            meta = labelled["metadata"]
            labels = {**meta["labels"], **patch["metadata"].get("labels", {})}
            annotations = {
                **meta.get("annotations", {}),
                **patch["metadata"].get("annotations", {}),
            }
            echo = {
                **labelled,
                "metadata": {
                    **meta,
                    "resourceVersion": version,
                    "labels": {k: v for k, v in labels.items() if v is not None},
                    "annotations": {k: v for k, v in annotations.items() if v is not None},
                    "managedFields": [
                        {
                            "manager": "schedpolicy",
                            "fieldsV1": {
                                "f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}}
                            },
                        }
                    ],
                },
            }
            labelled.update(echo)
            view.upsert_node(echo)  # the watch event, applied before the response
            sync.node_seen(view.nodes["n1"])
            return version

    sync = LabelSync(EchoFirst(), view, Events(Kube.__new__(Kube)))

    async def run() -> None:
        await sync.write("n1", view.policies())
        assert len(patches) == 1
        await sync.write("n1", [])  # no policy now: our labels must come off
        assert len(patches) == 2
        assert patches[1]["metadata"]["labels"] == {
            "schedpolicy.io/gpu-memory-mib": None,
            "schedpolicy.io/gpu-model": None,
        }

    asyncio.run(run())


def test_a_refused_write_is_kept_for_the_policy_status_until_one_succeeds() -> None:
    from schedpolicy.shell.kube_errors import Forbidden

    view = snapshot.build_view(policies=[POLICY])
    view.upsert_node(node(**{GFD_PRODUCT: "NVIDIA-A100-SXM4-80GB", GFD_MEMORY: "81920"}))
    denial = "ValidatingAdmissionPolicy 'schedpolicy-controller-guard' denied request"

    class Guarded:
        refuse = True

        async def apply_node_labels(self, name: str, uid: str, plan: LabelPlan) -> str:
            if self.refuse:
                raise Forbidden(403, denial)
            return "2"

    class Quiet(Events):
        async def warn(self, ref: ObjectRef, reason: str, message: str) -> None:
            pass

    kube, changes = Guarded(), []
    sync = LabelSync(kube, view, Quiet(Kube.__new__(Kube)), lambda: changes.append(1))

    async def run() -> None:
        await sync.write("n1", view.policies())
        await sync.write("n1", view.policies())  # the same refusal: no new status change
        assert len(changes) == 1
        ((node_name, (policy, message)),) = sync.failures.items()
        assert (node_name, policy) == ("n1", "gpus")
        assert denial in message
        kube.refuse = False
        sync.forget_writes()
        await sync.write("n1", view.policies())
        assert sync.failures == {}
        assert len(changes) == 2

    asyncio.run(run())


def test_a_refusal_is_forgotten_once_the_policy_no_longer_governs_the_node() -> None:
    view = snapshot.build_view(policies=[POLICY])
    view.upsert_node(node(**{GFD_PRODUCT: "NVIDIA-A100-SXM4-80GB", GFD_MEMORY: "81920"}))
    changes: list[int] = []
    sync = LabelSync(
        Kube.__new__(Kube), view, Events(Kube.__new__(Kube)), lambda: changes.append(1)
    )
    sync.refresh("n1", view.policies())
    sync.failures["n1"] = ("gpus", "403 Forbidden")
    sync.refresh("n1", [])
    assert sync.failures == {}
    assert changes == [1]
