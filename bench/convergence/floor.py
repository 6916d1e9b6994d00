"""B2's floor: what holding the cluster must cost at the least.

The interpreter with the operator's modules imported and holding nothing, measured
first; then the bytes of the records the view keeps, each as its compact msgspec
encoding, for every pod and node of the cluster. Prints `idle_rss_mib held_bytes pods
nodes` on its last line. Nothing Python does can hold the records in fewer bytes than
their encoding, so RSS above idle + held is overhead: object headers, dicts, indexes.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import msgspec

# The operator's and the webhook's imports are part of the floor.
import schedpolicy.app.runtime
import schedpolicy.app.webhook  # noqa: F401
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.informer import JSON
from schedpolicy.shell.kube import Kube
from schedpolicy.view import wire
from schedpolicy.view.records import node_record, pod_record


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def held_bytes(kubeconfig: str) -> tuple[int, int, int]:
    kube = await Kube.connect(Credentials(kubeconfig=kubeconfig), "bench-floor")
    encode = msgspec.json.encode
    total, counts = 0, []
    try:
        for path, shape, build in (
            ("/api/v1/pods", wire.Pod, pod_record),
            ("/api/v1/nodes", wire.Node, node_record),
        ):
            decoder = msgspec.json.Decoder(wire.List[shape])  # type: ignore[valid-type]
            token, count = "", 0
            while True:
                query = [("limit", "500")] + ([("continue", token)] if token else [])
                response = await kube.open_stream(path, query, JSON, 120)
                body = await response.read()
                response.release()
                page = decoder.decode(body)
                for item in page.items:
                    total += len(encode(build(item)))
                    count += 1
                token = page.metadata.continue_
                if not token:
                    break
            counts.append(count)
    finally:
        await kube.close()
    return total, counts[0], counts[1]


if __name__ == "__main__":
    idle = rss_mib()
    held, pods, nodes = asyncio.run(held_bytes(sys.argv[1]))
    print(f"{idle:.1f} {held} {pods} {nodes}")
