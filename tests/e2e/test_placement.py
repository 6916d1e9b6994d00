"""Placement: the admission webhook's hints and the chart's secondary scheduler, both real.

The operator serves the webhook on loopback with a certificate made for this
module; the MutatingWebhookConfiguration is the chart's, rendered by helm, with
only its clientConfig pointed at that loopback URL.

Every case runs on both admission paths: `webhook`, and `policy`, where the controller
compiles each policy to a MutatingAdmissionPolicy and narrows the webhook's match
condition, so that the same assertions hold for hints made inside the apiserver. On the
policy path each case also checks, pod by pod, that the apiserver stored exactly what the
webhook's `admission.review` makes of the same body (the `create_pod` fixture).
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from localcluster import LocalCluster, chart
from localcluster.operator_process import OperatorProcess, running
from localcluster.webhook import LoopbackWebhook
from schedpolicy.core.placement import compiler as admission_policy
from tests.e2e import admission_diff as diff
from tests.e2e.kubeobjects import PAUSE_IMAGE, eventually, scheduled_by, wait_until
from tests.e2e.pools import Pool, apply, apply_namespace_policy, get_json, namespace_policy

pytestmark = pytest.mark.e2e
SCHEDULER = "schedpolicy-scheduler"
MODEL, MEMORY = "schedpolicy.io/gpu-model", "schedpolicy.io/gpu-memory-mib"
HINTS = "schedpolicy.io/hints"


# The chart's own name: RBAC and the admission guard let the controller narrow only that one.
WEBHOOK_CONFIGURATION = "schedpolicy"


@pytest.fixture(scope="module", params=["webhook", "policy"])
def mode(request: pytest.FixtureRequest, cluster: LocalCluster) -> str:
    if request.param == "policy" and not cluster.serves_admission_policies():
        pytest.skip("this apiserver does not serve admissionregistration.k8s.io/v1 MAPs")
    return str(request.param)


@pytest.fixture(scope="module")
def processes(
    cluster: LocalCluster, crd: str, tmp_path_factory: pytest.TempPathFactory, mode: str
) -> Iterator[tuple[OperatorProcess, OperatorProcess]]:
    """The controller, and `schedpolicy webhook` on loopback behind the chart's webhook
    configuration: the two processes the chart runs."""
    webhook = LoopbackWebhook(
        cluster, tmp_path_factory.mktemp("webhook-pki"), WEBHOOK_CONFIGURATION
    )
    admission = [f"--admission-mode={mode}", f"--webhook-configuration={WEBHOOK_CONFIGURATION}"]
    with running(cluster, "--verbose", "--pending-threshold-seconds=5", *admission) as proc:
        hook = webhook.start(cluster.workdir / "logs" / "schedpolicy-webhook-e2e.log", "--verbose")
        webhook.register()
        try:
            yield proc, hook
        finally:
            webhook.unregister()
            hook.stop()


@pytest.fixture(scope="module")
def operator(processes: tuple[OperatorProcess, OperatorProcess]) -> OperatorProcess:
    return processes[0]


@pytest.fixture(scope="module")
def webhook_process(processes: tuple[OperatorProcess, OperatorProcess]) -> OperatorProcess:
    return processes[1]


CreatePod = Callable[[str, dict[str, Any]], Awaitable[client.V1Pod]]


class _Body:
    """What ApiClient.deserialize reads a response from."""

    def __init__(self, data: str) -> None:
        self.data = data


@pytest.fixture
async def create_pod(
    cluster: LocalCluster, api: client.ApiClient, mode: str
) -> AsyncIterator[CreatePod]:
    """`create(namespace, body)` creates the pod and returns it as the apiserver stored it.
    On the policy path it also checks that the stored pod equals the webhook path's answer
    for the same body (tests/e2e/admission_diff.py), byte for byte but for the token
    volume's random name. On the webhook path the two are one by construction."""
    core = client.CoreV1Api(api)
    plain = f"plain-{uuid.uuid4().hex[:8]}"
    if mode == "policy":
        await core.create_namespace({"metadata": {"name": plain}})

        def has_default_account() -> bool:
            listed = cluster.kubectl("get", "serviceaccounts", "-n", plain, "-o", "name")
            return "default" in listed

        await asyncio.to_thread(wait_until, has_default_account, within=30, what="an account")

    async def create(namespace: str, body: dict[str, Any]) -> client.V1Pod:
        sent = copy.deepcopy(body)
        raw: Any = await core.create_namespaced_pod(namespace, body, _preload_content=False)
        text = await raw.read()
        if mode == "policy":
            actual = diff.as_created(json.loads(text))
            inputs = await asyncio.to_thread(diff.cluster_inputs, cluster, namespace)
            lanes = diff.Lanes(api, plain, dict(inputs.namespaces), inputs)
            expected = diff.as_created(await lanes.webhook_path(sent, namespace))
            name = body["metadata"]["name"]
            assert actual == expected, f"{name}: stored {actual}; the webhook makes {expected}"
        pod: client.V1Pod = api.deserialize(_Body(text.decode()), "V1Pod")
        return pod

    try:
        yield create
    finally:
        if mode == "policy":
            await core.delete_namespace(plain)


def gpu_pod(name: str, pool: Pool, gpus: str = "1", **spec: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus} if gpus != "0" else {}
    labels = spec.pop("labels", {"app": "gpu"})
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": pool.selector,
            "containers": [
                {
                    "name": "c",
                    "image": PAUSE_IMAGE,
                    "resources": {"limits": limits, "requests": {"cpu": "500m"}},
                }
            ],
            **spec,
        },
    }


async def bound(
    api: client.ApiClient, namespace: str, selector: str, count: int
) -> list[client.V1Pod]:
    core = client.CoreV1Api(api)

    async def probe() -> list[client.V1Pod] | None:
        pods = (await core.list_namespaced_pod(namespace, label_selector=selector)).items
        done = [p for p in pods if p.spec.node_name]
        return done if len(done) == count else None

    return await eventually(probe, what=f"{count} pods ({selector}) to be bound")


def label_nodes_policy(name: str, pool: Pool) -> dict[str, Any]:
    return {
        "apiVersion": "schedpolicy.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "priority": 600,
            "nodeLabels": {
                "gpu": {
                    "sources": ["GPUFeatureDiscovery", "InstanceType"],
                    "nodeSelector": {"matchLabels": pool.selector},
                }
            },
        },
    }


def gpu_nodes(pool: Pool) -> dict[str, Any]:
    return {
        "p4de": pool.node("p4de", instance_type="p4de.24xlarge", gpus="8", cpu="96", pods="100"),
        "p5": pool.node("p5", instance_type="p5.48xlarge", gpus="8", cpu="192", pods="100"),
        "g5": pool.node("g5", instance_type="g5.12xlarge", gpus="4", cpu="48", pods="100"),
        "p4d": pool.node("p4d", instance_type="p4d.24xlarge", gpus="8", cpu="96", pods="100"),
    }


async def compiled(cluster: LocalCluster, name: str) -> dict[str, Any]:
    """Wait until a MutatingAdmissionPolicy serves this policy, and the webhook is no longer
    called for its pods (the controller narrows it a few seconds after the write)."""

    def done() -> dict[str, Any] | None:
        status = get_json(cluster, "spol", name).get("status", {})
        found = {c["type"]: c for c in status.get("conditions", [])}.get("Compiled", {})
        return status if found.get("status") == "True" else None

    status = await asyncio.to_thread(wait_until, done, within=30, what=f"{name} compiled")
    await asyncio.sleep(5)  # past the controller's settle time; the webhook is narrowed
    return status


async def settled(cluster: LocalCluster, name: str, mode: str) -> None:
    """Until the path under test serves a policy just applied: the webhook reads it from
    its watch; a MutatingAdmissionPolicy is written, loaded, and the webhook narrowed."""
    if mode == "policy":
        await compiled(cluster, name)
    else:
        await asyncio.sleep(1)


async def labelled(cluster: LocalCluster, names: list[str]) -> None:
    def done() -> bool:
        return all(MODEL in get_json(cluster, "node", n)["metadata"]["labels"] for n in names)

    await asyncio.to_thread(wait_until, done, within=30, what="GPU labels on the pool")


@pytest.mark.compat
async def test_gpu_pod_is_hinted_and_placed_by_our_scheduler(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    nodes = gpu_nodes(pool)
    pool.create(*nodes.values())
    policies.extend([f"labels-{pool.tag}", f"train-{namespace}"])
    apply(cluster, label_nodes_policy(f"labels-{pool.tag}", pool))
    apply(
        cluster,
        namespace_policy(
            f"train-{namespace}",
            namespace,
            placement={"gpu": {"models": ["A100", "H100"], "minMemoryMiB": 40961}},
        ),
    )
    await labelled(cluster, [n.name for n in nodes.values()])
    await settled(cluster, policies[-1], mode)

    for i in range(4):
        await create_pod(namespace, gpu_pod(f"train-{i}", pool))
    pods = await bound(api, namespace, "app=gpu", 4)

    for pod in pods:
        assert pod.spec.scheduler_name == SCHEDULER
        assert pod.spec.node_name in {nodes["p4de"].name, nodes["p5"].name}
        record = json.loads(pod.metadata.annotations[HINTS])
        assert record["policy"] == f"train-{namespace}"
        assert set(record["injected"]) >= {"schedulerName", "gpuAffinity"}
    reporters = await scheduled_by(api, namespace, [p.metadata.name for p in pods])
    assert set(reporters.values()) == {SCHEDULER}


@pytest.mark.compat
async def test_existing_terms_are_each_anded_with_gpu_requirements(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    nodes = gpu_nodes(pool)
    pool.create(*nodes.values())
    policies.extend([f"labels-{pool.tag}", f"terms-{namespace}"])
    apply(cluster, label_nodes_policy(f"labels-{pool.tag}", pool))
    apply(
        cluster,
        namespace_policy(
            f"terms-{namespace}",
            namespace,
            placement={"gpu": {"models": ["A100", "H100"], "minMemoryMiB": 40960}},
        ),
    )
    await labelled(cluster, [n.name for n in nodes.values()])
    await settled(cluster, policies[-1], mode)
    own_terms = [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes["g5"].name]}
            ]
        },
        {
            "matchExpressions": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["p5.48xlarge"],
                }
            ]
        },
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": own_terms}
        }
    }
    body = gpu_pod("terms", pool, affinity=affinity)
    await create_pod(namespace, body)
    (pod,) = await bound(api, namespace, "app=gpu", 1)

    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    stored = required.node_selector_terms
    # Each own term with the label requirements, then each again with the instance types
    # Karpenter could launch (on nodes of a NodePool only, which these fake nodes are not).
    launch = ["node.kubernetes.io/instance-type", "karpenter.sh/nodepool", MODEL]
    assert [[e.key for e in term.match_expressions] for term in stored] == [
        *([own["matchExpressions"][0]["key"], MODEL, MEMORY] for own in own_terms),
        *([own["matchExpressions"][0]["key"], *launch] for own in own_terms),
    ]
    # The g5 term can no longer match (A10G), so only the p5 term places the pod.
    assert pod.spec.node_name == nodes["p5"].name


async def test_profile_packs_gpus_where_the_default_scheduler_spreads(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
) -> None:
    ours = [
        pool.node(f"pack{i}", gpus="8", cpu="96", pods="100", labels={"group": "ours"})
        for i in range(4)
    ]
    theirs = [
        pool.node(f"spread{i}", gpus="8", cpu="96", pods="100", labels={"group": "default"})
        for i in range(4)
    ]
    pool.create(*ours, *theirs)
    core = client.CoreV1Api(api)
    for i in range(8):
        for group, scheduler in (("ours", SCHEDULER), ("default", "default-scheduler")):
            pod = gpu_pod(
                f"{group}-{i}",
                pool,
                labels={"app": "pack", "group": group, "schedpolicy.io/ignore": "true"},
                schedulerName=scheduler,
            )
            pod["spec"]["nodeSelector"] = {**pool.selector, "group": group}
            await core.create_namespaced_pod(namespace, pod)
    packed = await bound(api, namespace, "group=ours", 8)
    spread = await bound(api, namespace, "group=default", 8)

    assert len({p.spec.node_name for p in packed}) == 1, Counter(p.spec.node_name for p in packed)
    assert len({p.spec.node_name for p in spread}) > 1


async def test_cpu_pods_avoid_gpu_nodes(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """Without the hint, our bin-packing profile would prefer the smaller GPU node (a
    500m pod fills more of its 4 CPUs than of the CPU node's 64)."""
    gpu_node = pool.node(
        "gpu",
        instance_type="g5.12xlarge",
        gpus="4",
        cpu="4",
        pods="50",
        labels={"nvidia.com/gpu.product": "NVIDIA-A10G"},
    )
    cpu_node = pool.node("cpu", cpu="64", pods="50")
    pool.create(gpu_node, cpu_node)
    apply_namespace_policy(
        cluster, policies, f"avoid-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    await settled(cluster, policies[-1], mode)
    bodies = [gpu_pod(f"web-{i}", pool, gpus="0", labels={"app": "web"}) for i in range(3)]
    for body in bodies:
        await create_pod(namespace, body)
    pods = await bound(api, namespace, "app=web", 3)
    assert {p.spec.node_name for p in pods} == {cpu_node.name}
    assert {p.spec.scheduler_name for p in pods} == {SCHEDULER}


async def test_explicit_scheduler_is_left_alone(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    apply_namespace_policy(
        cluster, policies, f"other-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    await settled(cluster, policies[-1], mode)
    body = {
        "metadata": {"name": "mine", "labels": {"app": "x"}},
        "spec": {"schedulerName": "other", "containers": [{"name": "c", "image": PAUSE_IMAGE}]},
    }
    created = await create_pod(namespace, body)

    assert created.spec.scheduler_name == "other"
    assert created.spec.affinity is None
    assert HINTS not in (created.metadata.annotations or {})


async def test_webhook_down_fails_open_and_a_dead_scheduler_is_reported(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    pool: Pool,
    operator: OperatorProcess,
    webhook_process: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    pool.create(pool.node("open", cpu="8"))
    apply_namespace_policy(
        cluster, policies, f"open-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    core = client.CoreV1Api(api)
    await settled(cluster, policies[-1], mode)

    # With the webhook process gone, creation still succeeds: on the default scheduler when
    # the webhook hints, and hinted all the same when the apiserver does.
    webhook_process.kill()
    try:
        unhinted = gpu_pod("unhinted", pool, gpus="0", labels={"app": "open"})
        created = await create_pod(namespace, unhinted)
        (pod,) = await bound(api, namespace, "app=open", 1)
        if mode == "policy":
            assert created.spec.scheduler_name == SCHEDULER
            assert HINTS in (pod.metadata.annotations or {})
        else:
            assert created.spec.scheduler_name == "default-scheduler"
            assert HINTS not in (pod.metadata.annotations or {})
    finally:
        webhook_process.restart()
        webhook_process.wait_for_log("webhook view synced")

    # Back, it hints again; the controller never stopped.
    again_body = gpu_pod("hinted-again", pool, gpus="0", labels={"app": "again"})
    again = await create_pod(namespace, again_body)
    assert again.spec.scheduler_name == SCHEDULER
    assert HINTS in (again.metadata.annotations or {})
    assert operator.proc.poll() is None
    # The restarted process counted and timed that answer on its own /metrics; on the
    # policy path the apiserver never called it.
    answered = webhook_process.metric("schedpolicy_webhook_requests_total", result="hinted") or 0
    if mode == "policy":
        assert answered == 0
    else:
        assert answered >= 1
        assert (webhook_process.metric("schedpolicy_webhook_duration_seconds_count") or 0) >= 1

    # With our scheduler stopped, hinted pods wait, and the policy says why.
    cluster.stop_component(SCHEDULER)
    try:
        await asyncio.sleep(1)
        await core.create_namespaced_pod(
            namespace, gpu_pod("stuck", pool, gpus="0", labels={"app": "stuck"})
        )

        def degraded() -> dict[str, Any] | None:
            conditions = (
                get_json(cluster, "spol", f"open-{namespace}")
                .get("status", {})
                .get("conditions", [])
            )
            found = {c["type"]: c for c in conditions}.get("Degraded", {})
            return found if found.get("reason") == "SchedulerNotScheduling" else None

        cond = await asyncio.to_thread(
            wait_until, degraded, within=40, what="Degraded=SchedulerNotScheduling"
        )
        assert f"{namespace}/stuck" in cond["message"]
        # The same fact for alerting: a gauge per scheduler name.
        assert (operator.metric("schedpolicy_pending_pods", scheduler=SCHEDULER) or 0) >= 1
    finally:
        cluster.start_component(SCHEDULER)
    await bound(api, namespace, "app=stuck", 1)
    await eventually(
        lambda: asyncio.to_thread(
            lambda: (operator.metric("schedpolicy_pending_pods", scheduler=SCHEDULER) or 0) == 0
        ),
        within=30,
        what="schedpolicy_pending_pods back to 0 once the scheduler is back",
    )


async def test_the_products_own_pods_are_never_hinted(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """Wherever a release runs, its operator and scheduler pods keep the default scheduler:
    the chart's webhook configuration skips them by their labels, and so does the operator."""
    apply_namespace_policy(
        cluster, policies, f"all-{namespace}", namespace, placement={"avoidGPUNodes": True}
    )
    await settled(cluster, policies[-1], mode)
    rendered = chart.render(
        "templates/operator/deployment.yaml", "templates/scheduler/deployment.yaml"
    )
    templates = {
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"][
            "template"
        ]["metadata"]["labels"]
        for d in rendered
        if d["kind"] == "Deployment"
    }
    assert set(templates) == {"operator", "scheduler"}
    stripped = {k: v for k, v in templates["scheduler"].items() if k != "schedpolicy.io/ignore"}
    bodies = {
        "user": {"app": "user"},
        "operator": templates["operator"],
        "scheduler": templates["scheduler"],
        "scheduler-without-opt-out": stripped,
    }
    created = {}
    for name, labels in bodies.items():
        body = {
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": PAUSE_IMAGE}]},
        }
        created[name] = await create_pod(namespace, body)

    assert created["user"].spec.scheduler_name == SCHEDULER  # the webhook was there
    for name in ("operator", "scheduler", "scheduler-without-opt-out"):
        pod = created[name]
        assert pod.spec.scheduler_name == "default-scheduler", name
        assert pod.spec.affinity is None, name
        assert HINTS not in (pod.metadata.annotations or {}), name


async def test_compiled_objects_follow_the_policy(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    policies: list[str],
    mode: str,
) -> None:
    """Policy mode writes one MutatingAdmissionPolicy and binding per policy, owned by the
    webhook configuration, narrows the webhook to nothing when all are compiled, and
    removes them with the policy."""
    if mode != "policy":
        pytest.skip("the compiled objects exist only in policy mode")
    served = f"mapped-{namespace}"
    apply_namespace_policy(cluster, policies, served, namespace, placement={"avoidGPUNodes": True})
    status = await compiled(cluster, served)
    name = f"schedpolicy-hints-{served}"
    assert status["admission"] == {
        "path": "MutatingAdmissionPolicy",
        "reason": "Compiled",
        "policyObject": name,
    }
    # Owned by the chart's webhook configuration, so that an uninstall takes them along.
    uid = get_json(cluster, "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION)["metadata"][
        "uid"
    ]
    for kind in ("mutatingadmissionpolicy", "mutatingadmissionpolicybinding"):
        stored = get_json(cluster, kind, name)
        assert [o["uid"] for o in stored["metadata"]["ownerReferences"]] == [uid]
    config = get_json(cluster, "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION)
    conditions = config["webhooks"][0].get("matchConditions", [])
    assert [c["expression"] for c in conditions] == ["false"]

    cluster.kubectl("delete", "spol", served)

    def removed() -> bool:
        listed = cluster.kubectl(
            "get", "mutatingadmissionpolicies,mutatingadmissionpolicybindings", "-o", "name"
        )
        return name not in listed

    await asyncio.to_thread(wait_until, removed, within=30, what=f"{served}'s objects removed")


async def test_a_policy_cel_cannot_express_stays_on_the_webhook(
    cluster: LocalCluster,
    api: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    webhook_process: OperatorProcess,
    policies: list[str],
    mode: str,
    create_pod: CreatePod,
) -> None:
    """Under more higher-precedence overlapping policies than the compiler takes, a policy
    is not compiled: its Compiled condition says why, the webhook keeps being called for
    its pods, and hints them."""
    if mode != "policy":
        pytest.skip("only policy mode compiles")
    many = admission_policy.MAX_EARLIER_POLICIES + 1
    docs = [
        namespace_policy(
            f"high-{i}-{namespace}"[:63],
            namespace,
            priority=900,
            podSelector={"matchLabels": {"app": f"other-{i}"}},
            placement={"avoidGPUNodes": True},
        )
        for i in range(many)
    ]
    policies.extend(d["metadata"]["name"] for d in docs)
    low = f"low-{namespace}"
    docs.append(namespace_policy(low, namespace, priority=1, placement={"avoidGPUNodes": True}))
    policies.append(low)
    cluster.kubectl("apply", "-f", "-", objects=docs)

    def inexpressible() -> dict[str, Any] | None:
        conditions = get_json(cluster, "spol", low).get("status", {}).get("conditions", [])
        found = {c["type"]: c for c in conditions}.get("Compiled", {})
        return found if found.get("reason") == "Inexpressible" else None

    cond = await asyncio.to_thread(wait_until, inexpressible, within=60, what=f"{low} refused")
    assert cond["status"] == "False"
    assert cond["message"].startswith(f"priority: {many} policies of higher precedence")
    assert cond["message"].endswith("the webhook serves this policy")
    assert get_json(cluster, "spol", low)["status"]["admission"]["path"] == "Webhook"
    await compiled(cluster, docs[0]["metadata"]["name"])
    # It selects pods by namespace only, so the webhook is called for every pod.
    config = get_json(cluster, "mutatingwebhookconfiguration", WEBHOOK_CONFIGURATION)
    assert config["webhooks"][0].get("matchConditions", []) == []

    before = webhook_process.metric("schedpolicy_webhook_requests_total", result="hinted") or 0
    body = {
        "metadata": {"name": "by-the-webhook", "labels": {"app": "mine"}},
        "spec": {"containers": [{"name": "c", "image": PAUSE_IMAGE}]},
    }
    created = await create_pod(namespace, body)
    assert created.spec.scheduler_name == SCHEDULER
    assert json.loads(created.metadata.annotations[HINTS])["policy"] == low
    after = webhook_process.metric("schedpolicy_webhook_requests_total", result="hinted") or 0
    assert after == before + 1
