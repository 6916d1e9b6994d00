"""Runs last (files are collected in name order): after everything the e2e suite did,
with the operator watching every Pod and Node, none of them carries kopf's marks."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from localcluster.operator_process import OperatorProcess

pytestmark = pytest.mark.e2e


async def test_no_pod_or_node_carries_kopf_annotations_or_finalizers(
    api: client.ApiClient, operator: OperatorProcess
) -> None:
    core = client.CoreV1Api(api)
    objects = (await core.list_node()).items + (await core.list_pod_for_all_namespaces()).items
    assert objects, "nothing to check: the suite created no pods or nodes"
    marked = [
        (o.metadata.namespace, o.metadata.name, key)
        for o in objects
        for key in [*(o.metadata.annotations or {}), *(o.metadata.finalizers or [])]
        if "kopf" in key
    ]
    assert marked == []
