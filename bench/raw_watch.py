"""B2's baseline: the least a cost engine could hold. Lists and watches all pods and nodes
with kubernetes_asyncio, keeps only the fields the signals read, and prints its peak RSS (MiB)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config, watch


async def hold(kubeconfig: str, seconds: float) -> int:
    await config.load_kube_config(config_file=kubeconfig)
    pods: dict[str, tuple[Any, ...]] = {}
    nodes: dict[str, tuple[Any, ...]] = {}
    async with client.ApiClient() as api:
        core = client.CoreV1Api(api)

        async def follow(kind: str) -> None:
            lister = core.list_pod_for_all_namespaces if kind == "pods" else core.list_node
            listed = await lister(_preload_content=False)
            body = await listed.json()
            store = pods if kind == "pods" else nodes
            for item in body["items"]:
                store[item["metadata"]["uid"]] = compact(kind, item)
            version = body["metadata"]["resourceVersion"]
            async with watch.Watch().stream(
                lister, resource_version=version, timeout_seconds=int(seconds)
            ) as events:
                async for event in events:
                    obj = event["raw_object"]
                    if event["type"] == "DELETED":
                        store.pop(obj["metadata"]["uid"], None)
                    else:
                        store[obj["metadata"]["uid"]] = compact(kind, obj)

        await asyncio.gather(follow("pods"), follow("nodes"))
    return len(pods) + len(nodes)


def compact(kind: str, obj: dict[str, Any]) -> tuple[Any, ...]:
    meta = obj["metadata"]
    if kind == "nodes":
        return (meta["name"], meta.get("labels"), obj["status"].get("allocatable", {}).get("cpu"))
    spec = obj.get("spec", {})
    owner = next((o["uid"] for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    requests = [
        c.get("resources", {}).get("requests", {}).get("cpu") for c in spec.get("containers", [])
    ]
    return (
        meta["namespace"],
        meta["name"],
        meta.get("labels"),
        (meta.get("annotations") or {}).get("controller.kubernetes.io/pod-deletion-cost"),
        owner,
        spec.get("nodeName"),
        obj.get("status", {}).get("phase"),
        tuple(requests),
    )


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


if __name__ == "__main__":
    held = asyncio.run(hold(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 10))
    print(f"held {held} objects")
    print(f"{peak_rss_mib():.1f}")
