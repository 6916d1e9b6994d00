"""`make demo`: the story, on the local cluster that `make cluster-up` started.

1. the cluster: GPU, spot and on-demand nodes in three zones;
2. the operator runs and the example policies are applied;
3. a web tier and GPU training workers are deployed;
4. policies, GPU labels and the packing of the GPU pods;
5. `simulate scale-down`, then the real scale-down, and a table showing that the spot and
   emptiest-node pods went first, exactly as simulated;
6. GPU inference scaled down by GPU fill: the replicas on the least-used GPU nodes go, so
   whole GPU nodes are left with no GPU in use, as simulated.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from typing import Any

from localcluster import LocalCluster
from localcluster.binaries import REPO, bin_dir
from schedpolicy.app import explain
from schedpolicy.core.wellknown import COST_ANNOTATION
from schedpolicy.shell.credentials import Credentials
from schedpolicy.shell.kube import Kube

CLUSTER = LocalCluster()


def step(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def show(*args: str) -> str:
    out = CLUSTER.kubectl(*args)
    print(f"$ kubectl {' '.join(args)}\n{out.rstrip()}", flush=True)
    return out


def items(*args: str) -> list[dict[str, Any]]:
    return list(json.loads(CLUSTER.kubectl("get", *args, "-o", "json"))["items"])


def wait(what: str, probe: Any, within: float = 120) -> Any:
    started = time.monotonic()
    while time.monotonic() - started < within:
        result = probe()
        if result:
            print(f"   {what}: done in {time.monotonic() - started:.0f}s", flush=True)
            return result
        time.sleep(1)
    raise SystemExit(f"demo: timed out waiting for {what}")


def web_pods() -> list[dict[str, Any]]:
    return [
        p
        for p in items("pods", "-n", "shop", "-l", "app=web")
        if not p["metadata"].get("deletionTimestamp")
    ]


def main() -> int:
    if not CLUSTER.healthy():
        print("demo: the local cluster is not running; `make demo` starts it", file=sys.stderr)
        return 1
    step("1. A real control plane with fake GPU, spot and on-demand nodes in three zones")
    show(
        "get",
        "nodes",
        "-o",
        "custom-columns=NODE:.metadata.name,ZONE:.metadata.labels.topology\\.kubernetes\\.io/zone,"
        "TYPE:.metadata.labels.node\\.kubernetes\\.io/instance-type,SPOT(KARPENTER):.metadata.labels.karpenter\\.sh/capacity-type,"
        "SPOT(EKS):.metadata.labels.eks\\.amazonaws\\.com/capacityType,GPUS:.status.allocatable.nvidia\\.com/gpu",
    )

    step("2. The operator (a controller and a webhook process), and the example policies")
    CLUSTER.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    CLUSTER.kubectl("wait", "--for=condition=Established", "crd/schedulingpolicies.schedpolicy.io")
    if CLUSTER.supervisor.get("schedpolicy-operator") is None:
        CLUSTER.start_operator()
        logs = CLUSTER.workdir / "logs"
        print(f"   controller started; its log: {logs / 'schedpolicy-operator.log'}")
        print(f"   webhook started; its log: {logs / 'schedpolicy-webhook.log'}")
    wait(
        "the controller's view",
        lambda: (
            "view synced" in (CLUSTER.workdir / "logs" / "schedpolicy-operator.log").read_text()
        ),
    )
    wait(
        "the webhook's view",
        lambda: (
            "webhook view synced"
            in (CLUSTER.workdir / "logs" / "schedpolicy-webhook.log").read_text()
        ),
    )
    show("apply", "-f", str(REPO / "examples"))

    step(
        "3. A web tier (9 replicas, next to 2 big cache pods) and GPU training workers (6 x 1 GPU)"
    )
    workloads = REPO / "examples" / "workloads"
    if CLUSTER.kubectl(
        "get", "namespace", "shop", "ml", "serving", "--ignore-not-found", "-o", "name"
    ).strip():
        print("   removing the workloads of an earlier run")
        CLUSTER.kubectl(
            "delete", "namespace", "shop", "ml", "serving", "--ignore-not-found", "--wait=true"
        )
    show("apply", "-f", str(workloads / "shop-cache.yaml"))
    wait(
        "2 cache pods running",
        lambda: (
            sum(
                p["status"].get("phase") == "Running"
                for p in items("pods", "-n", "shop", "-l", "app=cache")
            )
            == 2
        ),
    )
    show("apply", "-f", str(workloads / "web.yaml"), "-f", str(workloads / "training.yaml"))
    wait(
        "9 web pods running",
        lambda: sum(p["status"].get("phase") == "Running" for p in web_pods()) == 9,
    )
    wait(
        "6 training pods running",
        lambda: sum(p["status"].get("phase") == "Running" for p in items("pods", "-n", "ml")) == 6,
    )
    wait(
        "every web pod costed",
        lambda: all(COST_ANNOTATION in p["metadata"].get("annotations", {}) for p in web_pods()),
    )

    step("4. Policies, verified GPU labels, and how the GPU pods were packed")
    # What the demo itself saw, so that the table below is the settled one, not a status
    # written before the workloads existed.
    # The cache pods carry no component label, so no policy governs them.
    expected = {"spot-first-web": (len(web_pods()), len(web_pods())), "gpu-training": (6, None)}
    wait("policy statuses to count these pods", lambda: statuses_settled(expected))
    show("get", "spol")
    show(
        "get",
        "nodes",
        "-l",
        "schedpolicy.io/gpu-model",
        "-o",
        "custom-columns=NODE:.metadata.name,TYPE:.metadata.labels.node\\.kubernetes\\.io/instance-type,"
        "MODEL:.metadata.labels.schedpolicy\\.io/gpu-model,MIB:.metadata.labels.schedpolicy\\.io/gpu-memory-mib,"
        "GPUS:.status.allocatable.nvidia\\.com/gpu",
    )
    trainers = Counter(p["spec"].get("nodeName") for p in items("pods", "-n", "ml"))
    print("   training pods per node:", dict(trainers), "(packed by schedpolicy-scheduler)")

    step("5. Scale the web tier down: first simulated, then for real")
    nodes = {n["metadata"]["name"]: n for n in items("nodes")}
    before = {p["metadata"]["name"]: p for p in web_pods()}
    prediction, target, why = asyncio.run(simulate(sorted(before)))
    print(explain.render_simulation(prediction))
    show("scale", "deployment", "web", "-n", "shop", f"--replicas={target}")
    wait(f"{target} web pods left", lambda: len(web_pods()) == target)
    after = {p["metadata"]["name"] for p in web_pods()}
    deleted = set(before) - after
    predicted = {r["pod"] for r in prediction["deleted"]}
    rows = [["POD", "NODE", "CAPACITY", "SIGNALS", "COST", "SIMULATED", "DELETED"]]
    for name, pod in sorted(
        before.items(), key=lambda kv: int(kv[1]["metadata"]["annotations"][COST_ANNOTATION])
    ):
        node = nodes[pod["spec"]["nodeName"]]["metadata"]["labels"]
        capacity = node.get("karpenter.sh/capacity-type") or node.get(
            "eks.amazonaws.com/capacityType", "?"
        )
        rows.append(
            [
                name,
                pod["spec"]["nodeName"],
                capacity,
                why[name],
                pod["metadata"]["annotations"][COST_ANNOTATION],
                "delete" if name in predicted else "keep",
                "deleted" if name in deleted else "kept",
            ]
        )
    print(explain.table(rows))
    exact = deleted == predicted
    print(
        f"\nThe ReplicaSet controller deleted {len(deleted)} pods; simulate predicted "
        f"{'exactly these' if exact else 'OTHER pods: ' + str(sorted(predicted))}."
    )
    gpu_exact = gpu_scale_down()
    print(f"""
The cluster keeps running, with the operator. Explore it:
  export KUBECONFIG={CLUSTER.kubeconfig}
  {bin_dir() / "kubectl"} get spol
  {REPO / ".venv" / "bin" / "schedpolicy"} explain pod shop/{sorted(after)[0]}
  {REPO / ".venv" / "bin" / "schedpolicy"} explain node gpu-c-p4de
  {REPO / ".venv" / "bin" / "schedpolicy"} simulate scale-down deployment shop/web --replicas 1
Stop everything with: make cluster-down""")
    return 0 if exact and gpu_exact else 1


def statuses_settled(expected: dict[str, tuple[int, int | None]]) -> bool:
    """Every policy's status is of its current generation, and the named policies count
    exactly the (matched, costed) pods given; None: not costed at all (a policy with no
    deletionCost)."""
    for policy in items("spol"):
        status = policy.get("status", {})
        if status.get("observedGeneration") != policy["metadata"]["generation"]:
            return False
        want = expected.get(policy["metadata"]["name"])
        if want is not None and (status.get("matchedPods"), status.get("costedPods")) != want:
            return False
    return True


def gpus_in_use() -> Counter[str]:
    used: Counter[str] = Counter()
    for pod in items("pods", "-A"):
        if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") not in (
            "Pending",
            "Running",
        ):
            continue
        for c in pod["spec"]["containers"]:
            limits = (c.get("resources") or {}).get("limits") or {}
            used[pod["spec"].get("nodeName") or "-"] += int(limits.get("nvidia.com/gpu", "0"))
    return used


def gpu_table(nodes: list[str], used: Counter[str], serving: Counter[str]) -> str:
    rows = [["GPU NODE", "GPUS IN USE", "INFERENCE REPLICAS"]]
    rows += [[n, str(used[n]), str(serving[n])] for n in nodes]
    return explain.table(rows)


def serving_pods() -> list[dict[str, Any]]:
    return [
        p
        for p in items("pods", "-n", "serving", "-l", "app=llm-serve")
        if not p["metadata"].get("deletionTimestamp")
    ]


def gpu_scale_down() -> bool:
    step("6. GPU inference scaled down by GPU fill: whole GPU nodes freed, as simulated")
    show("apply", "-f", str(REPO / "examples" / "workloads" / "inference.yaml"))
    wait(
        "6 inference replicas running and costed",
        lambda: (
            len(pods := serving_pods()) == 6
            and all(COST_ANNOTATION in p["metadata"].get("annotations", {}) for p in pods)
        ),
    )
    gpu_nodes = sorted(
        n["metadata"]["name"]
        for n in items("nodes")
        if int(n["status"].get("allocatable", {}).get("nvidia.com/gpu", "0")) > 0
    )
    before = {p["metadata"]["name"] for p in serving_pods()}
    print(
        gpu_table(gpu_nodes, gpus_in_use(), Counter(p["spec"]["nodeName"] for p in serving_pods()))
    )
    prediction = asyncio.run(simulate_inference())
    print(explain.render_simulation(prediction))
    target = prediction["to"]
    show("scale", "deployment", "llm-serve", "-n", "serving", f"--replicas={target}")
    wait(f"{target} inference replicas left", lambda: len(serving_pods()) == target)
    left = serving_pods()
    used = gpus_in_use()
    print(gpu_table(gpu_nodes, used, Counter(p["spec"]["nodeName"] for p in left)))
    deleted = before - {p["metadata"]["name"] for p in left}
    exact = deleted == {r["pod"] for r in prediction["deleted"]}
    free = [n for n in gpu_nodes if used[n] == 0]
    print(
        f"\nGPU nodes with no GPU in use: {', '.join(free) or 'none'}. The ReplicaSet"
        f" controller deleted {'exactly the replicas simulate predicted' if exact else 'OTHER replicas than simulated'}."
    )
    return exact


async def simulate_inference() -> dict[str, Any]:
    """The deepest certain scale-down of the inference Deployment, down to half."""
    kube = await Kube.connect(Credentials(kubeconfig=str(CLUSTER.kubeconfig)), "demo")
    try:
        # A replica's cost follows its node's fill as later replicas land there; the writes
        # are rate-limited, so wait until no pod has one pending before simulating.
        for _ in range(120):
            pending = [
                (await explain.explain_pod(kube, f"serving/{p['metadata']['name']}"))["write"][
                    "pending"
                ]
                for p in serving_pods()
            ]
            if not any(pending):
                break
            await asyncio.sleep(1)
        for target in range(3, 6):
            result = await explain.simulate_scale_down(kube, "serving/llm-serve", target)
            if result["certain"]:
                break
        return result
    finally:
        await kube.close()


async def simulate(pods: list[str]) -> tuple[dict[str, Any], int, dict[str, str]]:
    """The scale-down to show (the smallest target whose cut is not a tie), and each pod's
    signal points as `explain pod` gives them."""
    kube = await Kube.connect(Credentials(kubeconfig=str(CLUSTER.kubeconfig)), "demo")
    try:
        why = {}
        for name in pods:
            out = await explain.explain_pod(kube, f"shop/{name}")
            why[name] = " ".join(f"{s['type']}{s['points']:+d}" for s in out["cost"]["signals"])
        for target in range(2, 9):
            result = await explain.simulate_scale_down(kube, "shop/web", target)
            if result["certain"]:
                break
        return result, target, why
    finally:
        await kube.close()


if __name__ == "__main__":
    sys.exit(main())
