"""A stopping webhook keeps answering, but retires each keep-alive connection it answers on:
the apiserver pools connections by Service name across pods, and would otherwise keep
sending to a pod whose endpoint is already gone until the process closed them under it."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp.test_utils import TestClient, TestServer

from schedpolicy.app.webhook import application
from schedpolicy.view.placement.admission_view import AdmissionView

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "req-1",
        "operation": "CREATE",
        "namespace": "apps",
        "object": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
    },
}


@pytest.mark.parametrize(("stopping", "keeps_alive"), [(False, True), (True, False)])
async def test_connections_are_closed_only_while_stopping(
    stopping: bool, keeps_alive: bool
) -> None:
    halt = asyncio.Event()
    if stopping:
        halt.set()
    async with TestClient(TestServer(application(AdmissionView(), (), halt))) as client:
        response = await client.post("/hints", data=json.dumps(REVIEW))
        assert response.status == 200
        answer = await response.json()
        assert answer["response"]["allowed"] is True
        assert (response.headers.get("Connection", "").lower() != "close") == keeps_alive
