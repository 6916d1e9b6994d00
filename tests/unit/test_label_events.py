"""Refusals reach the admin: one GPULabelRefused Event and one count per refusal while it lasts."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import REGISTRY

from schedpolicy import decisions
from schedpolicy.gpu import GFD_MEMORY, GFD_PRODUCT
from schedpolicy.kube import Kube, ObjectRef
from schedpolicy.label_sync import LabelSync

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

    async def warn(ref: ObjectRef, reason: str, message: str) -> None:
        posted.append((reason, message))

    view = decisions.build_view(policies=[POLICY])
    sync = LabelSync(Kube.__new__(Kube), view, warn)
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
