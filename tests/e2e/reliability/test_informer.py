"""The informer against the real apiserver: the watch-list protocol where it is served, and
the paged-list fallback on a second apiserver (same etcd) with the WatchList gate off."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from localcluster import LocalCluster
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.informer import Informer, Resource, by_uid
from schedpolicy.shell.kube import Kube
from schedpolicy.view import wire
from tests.e2e.kubeobjects import PAUSE_IMAGE, eventually

pytestmark = pytest.mark.e2e


class Held:
    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.pruned = 0

    def upsert(self, obj: wire.Pod) -> None:
        self.names[obj.metadata.uid] = obj.metadata.name

    def delete(self, obj: wire.Pod) -> None:
        self.names.pop(obj.metadata.uid, None)

    def prune(self, keep: set[str]) -> None:
        self.pruned += 1
        for uid in [u for u in self.names if u not in keep]:
            del self.names[uid]


def bare_pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"informer-test": "yes"}},
        # Never scheduled: the pod only has to exist.
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": PAUSE_IMAGE}]},
    }


@contextlib.asynccontextmanager
async def running(informer: Informer[wire.Pod]) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 60)
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def follow_changes(api: client.ApiClient, namespace: str, held: Held) -> None:
    core = client.CoreV1Api(api)

    async def holds(name: str) -> bool:
        return name in held.names.values()

    async def lacks(name: str) -> bool:
        return name not in held.names.values()

    await core.create_namespaced_pod(namespace, bare_pod("later"))
    await eventually(lambda: holds("later"), what="a pod created after sync")
    await core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    await eventually(lambda: lacks("first"), what="a deleted pod gone")


async def start_pods(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    for name in ("first", "second", "third"):
        await core.create_namespaced_pod(namespace, bare_pod(name))


def resource(namespace: str) -> Resource[wire.Pod]:
    return Resource("pods-e2e", f"/api/v1/namespaces/{namespace}/pods", wire.Pod, by_uid)


async def test_watch_list_streams_the_initial_state(
    api: client.ApiClient, kube: Kube, namespace: str
) -> None:
    """Against the real apiserver, the informer's watch-list streams the pods already there,
    closed by one bookmark, then follows a create and a delete."""
    await start_pods(api, namespace)
    held = Held()
    informer = Informer(kube, resource(namespace), held, timeout_seconds=30)
    async with running(informer):
        assert informer.watch_list, "kube-apiserver serves watch-list by default from 1.34 on"
        assert sorted(held.names.values()) == ["first", "second", "third"]
        assert held.pruned == 1, "the initial-events-end bookmark closed the initial state"
        await follow_changes(api, namespace, held)


async def test_paged_list_when_the_apiserver_refuses_watch_list(
    cluster: LocalCluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """Against an apiserver with the WatchList gate off, the informer falls back to a paged
    list (two pages for three pods) and follows a create and a delete all the same."""
    await start_pods(api, namespace)
    server = await asyncio.to_thread(
        cluster.start_extra_apiserver,
        "kube-apiserver-no-watchlist",
        ["--feature-gates=WatchList=false"],
    )
    try:
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = server
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        kube = await Kube.connect(Credentials(kubeconfig=str(kubeconfig)), "e2e-fallback")
        try:
            held = Held()
            # A page of 2 makes the three pods take two pages.
            informer = Informer(kube, resource(namespace), held, timeout_seconds=30, page=2)
            async with running(informer):
                assert not informer.watch_list, "the refusal switched it to a paged list"
                assert sorted(held.names.values()) == ["first", "second", "third"]
                await follow_changes(api, namespace, held)
        finally:
            await kube.close()
    finally:
        cluster.supervisor.stop("kube-apiserver-no-watchlist")
