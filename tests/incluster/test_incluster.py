"""The chart as users install it, on a real kubelet node: `helm install` with the images built
from the Dockerfile, the kubelet's probes, the apiserver calling the webhook through the
chart's Service with the chart's own CA, the controller on its mounted ServiceAccount token,
failover, a rolling upgrade under load, and uninstall.

The tests run in order and share one release: each builds on what the one before left.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import LocalCluster, audit, chart
from localcluster.node import NAME as NODE
from localcluster.node import RUNC
from tests.e2e.kubeobjects import PAUSE_IMAGE, wait_until
from tests.incluster.conftest import VALUES
from tests.incluster.workloads import (
    APP_NS,
    LOAD_NS,
    SCHEDULER,
    PodStream,
    gpu_deployment,
    policies,
)

pytestmark = pytest.mark.incluster
NS = chart.NAMESPACE
HINTS = "schedpolicy.io/hints"
COST = "controller.kubernetes.io/pod-deletion-cost"
LEASE = "schedpolicy"
LEASE_SECONDS = 15  # the chart's default operator.leaderElection.leaseDuration
APP_UID = 65532
SINGLETON = "schedpolicy"  # the chart's cluster-scoped objects, whatever the release


def get(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json"))


def component_pods(cluster: LocalCluster) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for pod in get(cluster, "pods", "-n", NS)["items"]:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        component = pod["metadata"]["labels"].get("app.kubernetes.io/component", "?")
        found.setdefault(component, []).append(pod)
    return found


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def installed(cluster: LocalCluster) -> Iterator[LocalCluster]:
    try:
        chart.install(cluster.kubeconfig, VALUES)
        yield cluster
    finally:
        chart.uninstall(cluster.kubeconfig)


# ---- install -------------------------------------------------------------------------------


def test_every_chart_pod_runs_on_the_real_node_and_is_ready_by_its_probes(
    installed: LocalCluster,
) -> None:
    """After `helm install`, the controller, the webhook and the scheduler run two pods each
    on the real node, each Ready by its /readyz probe, as the kubelet's own
    prober_probe_total counts."""
    pods = component_pods(installed)
    assert {k: len(v) for k, v in pods.items()} == {"operator": 2, "webhook": 2, "scheduler": 2}
    for pod in (p for group in pods.values() for p in group):
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] == NODE, name
        assert ready(pod), (name, pod["status"])
        (container,) = pod["spec"]["containers"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", name
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz", name
    # The kubelet itself counts its probes: read through the apiserver's node proxy.
    metrics = installed.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/metrics/probes")
    passed = [
        line
        for line in metrics.splitlines()
        if line.startswith("prober_probe_total")
        and 'probe_type="Readiness"' in line
        and 'result="successful"' in line
        and f'namespace="{NS}"' in line
    ]
    probed = {line.split('pod="')[1].split('"')[0] for line in passed}
    assert probed == {p["metadata"]["name"] for g in pods.values() for p in g}


def test_the_webhook_is_registered_through_the_chart_service_with_its_own_ca(
    installed: LocalCluster,
) -> None:
    """The apiserver reaches the webhook through the chart's Service, with the chart's own
    CA bundle, and the Service's endpoints are exactly the webhook pods."""
    (config,) = [
        c
        for c in get(installed, "mutatingwebhookconfigurations")["items"]
        if c["metadata"]["name"].startswith("schedpolicy")
    ]
    (hook,) = config["webhooks"]
    client = hook["clientConfig"]
    assert "url" not in client
    assert client["service"]["namespace"] == NS
    assert client["caBundle"]
    (service,) = [
        s
        for s in get(installed, "services", "-n", NS)["items"]
        if s["metadata"]["name"] == client["service"]["name"]
    ]
    slices = get(
        installed,
        "endpointslices",
        "-n",
        NS,
        "-l",
        f"kubernetes.io/service-name={service['metadata']['name']}",
    )["items"]
    ips = {a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]}
    webhook_ips = {p["status"]["podIP"] for p in component_pods(installed)["webhook"]}
    assert ips == webhook_ips


# ---- security, seen from the host ----------------------------------------------------------

# What every pod gets from Kubernetes and the runtime, whatever its spec says: the IPC
# filesystems (memory-backed, sized by the runtime) and the kubelet's termination-message file.
EVERY_POD = {"/dev/shm", "/dev/mqueue", "/dev/termination-log"}
# Writable mount points, tried as the container's user. Character devices are skipped: the
# runtime masks /proc files with /dev/null, which takes writes and keeps nothing.
PROBE = """
import os, stat, sys
pid = sys.argv[1]
targets = {"/"} | {line.split()[4] for line in open(f"/proc/{pid}/mountinfo")}
writable = []
for target in sorted(targets):
    path = f"/proc/{pid}/root{target}"
    try:
        if stat.S_ISCHR(os.stat(path).st_mode):
            continue
        if os.path.isdir(path):
            probe = os.path.join(path, ".schedpolicy-write-probe")
            os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os.unlink(probe)
        else:
            open(path, "a").close()
    except OSError:
        continue
    writable.append(target)
print("\\n".join(writable))
"""


def containers(cluster: LocalCluster) -> list[dict[str, Any]]:
    """The node's running app containers (not sandboxes), from runc's own state on the host."""
    root = cluster.node.runc_root / "k8s.io"
    listed = subprocess.run(
        [RUNC, f"--root={root}", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = []
    for entry in json.loads(listed or "[]"):
        spec = json.loads((Path(entry["bundle"]) / "config.json").read_text())
        notes = spec.get("annotations", {})
        if entry["status"] == "running" and notes.get("io.kubernetes.cri.container-type") == (
            "container"
        ):
            found.append({"pid": entry["pid"], "pod": notes["io.kubernetes.cri.sandbox-name"]})
    return found


def test_containers_run_as_65532_on_a_read_only_root_with_only_tmp_writable(
    installed: LocalCluster,
) -> None:
    """Seen from the host, every chart container runs as UID 65532 on a read-only root, and
    only /tmp is writable besides what every pod gets."""
    running = containers(installed)
    assert len(running) == 6, running
    for container in running:
        pid = container["pid"]
        status = Path(f"/proc/{pid}/status").read_text()
        (uids,) = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
        assert uids == [str(APP_UID)] * 4, (container, uids)
        # Even this host's root cannot write there: the mount is read-only.
        with pytest.raises(OSError, match="Read-only file system"):
            Path(f"/proc/{pid}/root/.schedpolicy-probe").write_text("x")
        # As the container's own user, every mount point in its mount namespace.
        probe = subprocess.run(
            [
                *("setpriv", f"--reuid={APP_UID}", f"--regid={APP_UID}", "--clear-groups"),
                *("/usr/bin/python3", "-c", PROBE, str(pid)),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        writable = set(probe.stdout.split())
        assert writable - EVERY_POD == {"/tmp"}, (container, writable)


# ---- the real path -------------------------------------------------------------------------


def bound_pods(cluster: LocalCluster, namespace: str, count: int) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        pods = get(cluster, "pods", "-n", namespace, "-l", "app=gpu")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        done = [p for p in live if p["spec"].get("nodeName")]
        return done if len(done) == count else None

    return wait_until(probe, within=90, what=f"{count} pods bound in {namespace}")


def test_pods_are_hinted_placed_and_costed_by_the_chart_components(
    installed: LocalCluster,
) -> None:
    """GPU pods are hinted by the chart's webhook, bound by the chart's scheduler onto the
    labelled KWOK GPU nodes, and costed by the chart's controller, whose ServiceAccount and
    pod the audit log names."""
    installed.kubectl("create", "namespace", APP_NS)
    installed.kubectl("apply", "-f", "-", objects=policies())
    wait_until(
        lambda: all(
            "schedpolicy.io/gpu-model" in get(installed, "node", n)["metadata"]["labels"]
            for n in ("gpu-a", "gpu-b")
        ),
        within=60,
        what="GPU labels from the in-cluster controller",
    )
    installed.kubectl("apply", "-f", "-", objects=[gpu_deployment(4)])
    pods = bound_pods(installed, APP_NS, 4)
    for pod in pods:
        hints = json.loads(pod["metadata"]["annotations"][HINTS])
        assert hints["policy"] == "incluster-apps"
        assert {"schedulerName", "gpuAffinity"} <= set(hints["injected"])
        assert pod["spec"]["schedulerName"] == SCHEDULER
        assert pod["spec"]["nodeName"] in {"gpu-a", "gpu-b"}
    events = get(installed, "events", "-n", APP_NS)["items"]
    reporters = {
        e["involvedObject"]["name"]: e.get("reportingComponent")
        for e in events
        if e["reason"] == "Scheduled"
    }
    assert {reporters.get(p["metadata"]["name"]) for p in pods} == {SCHEDULER}

    def costed() -> list[dict[str, Any]] | None:
        now = get(installed, "pods", "-n", APP_NS, "-l", "app=gpu")["items"]
        return now if all(COST in (p["metadata"].get("annotations") or {}) for p in now) else None

    for pod in wait_until(costed, within=60, what="costs on every pod"):
        spot = pod["spec"]["nodeName"] == "gpu-b"
        assert (int(pod["metadata"]["annotations"][COST]) < 0) == spot, pod["metadata"]["name"]

    operators = {p["metadata"]["name"] for p in component_pods(installed)["operator"]}
    writes = [
        e
        for e in audit.writes_by(installed.audit_log)
        if e.resource == "pods" and e.namespace == APP_NS
    ]
    assert writes, "no cost write by the chart's ServiceAccount in the audit log"
    assert {e.pod for e in writes} <= operators
    mutated = webhook_mutations(installed.audit_log, APP_NS)
    assert mutated == len(pods)


def webhook_mutations(log: Path, namespace: str) -> int:
    """Pod creates the apiserver records as mutated by the chart's webhook. (The ReplicaSet
    controller names its pods by generateName, so the record at this level has no name.)"""
    count = 0
    for line in log.read_text().splitlines():
        raw = json.loads(line)
        ref = raw.get("objectRef") or {}
        if raw.get("verb") != "create" or ref.get("resource") != "pods":
            continue
        if ref.get("namespace") != namespace or raw.get("stage") != "ResponseComplete":
            continue
        notes = raw.get("annotations") or {}
        for key, value in notes.items():
            if key.startswith("mutation.webhook.admission.k8s.io/"):
                record = json.loads(value)
                if record.get("mutated") and record["webhook"].startswith("hints.schedpolicy"):
                    count += 1
    return count


# ---- failover ------------------------------------------------------------------------------


def lease_holder(cluster: LocalCluster) -> str:
    return str(get(cluster, "lease", LEASE, "-n", NS)["spec"].get("holderIdentity") or "")


def test_deleting_the_leader_hands_the_lease_over_and_the_old_pod_writes_nothing(
    installed: LocalCluster,
) -> None:
    """Deleting the leading controller pod hands the Lease to another replica within the
    lease duration; the new leader costs new pods, and the deleted pod writes nothing after."""
    operators = [p["metadata"]["name"] for p in component_pods(installed)["operator"]]
    holder = lease_holder(installed)
    (leader,) = [name for name in operators if name in holder]
    deleted_at = audit.now()
    started = time.monotonic()
    installed.kubectl("delete", "pod", leader, "-n", NS, "--wait=false")
    new = wait_until(
        lambda: h if (h := lease_holder(installed)) and leader not in h else None,
        within=LEASE_SECONDS + 5,
        what="another replica to take the Lease",
    )
    took = time.monotonic() - started
    print(f"failover: {leader} deleted; {new} holds the Lease after {took:.1f}s")
    # The old leader releases the Lease on SIGTERM, so the standby and the ReplicaSet's
    # replacement pod race for it; either is a correct handover, the deleted pod is not.
    now_running = [p["metadata"]["name"] for p in component_pods(installed)["operator"]]
    (successor,) = [name for name in now_running if name in new]
    assert successor != leader, new
    installed.kubectl("scale", "deployment", "gpu", "-n", APP_NS, "--replicas=6")
    bound_pods(installed, APP_NS, 6)
    wait_until(
        lambda: all(
            COST in (p["metadata"].get("annotations") or {})
            for p in get(installed, "pods", "-n", APP_NS, "-l", "app=gpu")["items"]
        ),
        within=60,
        what="costs on the new pods, from the new leader",
    )
    late = [
        e
        for e in audit.writes_by(installed.audit_log, since=deleted_at)
        if e.pod == leader and not (e.resource == "leases" and e.name == LEASE)
    ]
    assert late == [], late


# ---- upgrade under load ----------------------------------------------------------------------


def fail_open_count(cluster: LocalCluster) -> float:
    metrics = cluster.kubectl("get", "--raw", "/metrics")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("apiserver_admission_webhook_fail_open_count")
    )


def test_a_helm_upgrade_rolls_the_webhook_without_a_pod_created_unhinted(
    installed: LocalCluster,
) -> None:
    """A `helm upgrade` rolls the webhook while 10 pods a second are created: every create
    succeeds, none fails open, and every pod is hinted."""
    installed.kubectl("create", "namespace", LOAD_NS)
    before_pods = {p["metadata"]["name"] for p in component_pods(installed)["webhook"]}
    before = fail_open_count(installed)
    with PodStream(installed, LOAD_NS, per_second=10) as stream:
        time.sleep(3)
        # A changed value changes the webhook's pod template: a rolling update.
        chart.install(installed.kubeconfig, VALUES, "webhook.verbose=true", upgrade=True)
        time.sleep(3)
    after_pods = {p["metadata"]["name"] for p in component_pods(installed)["webhook"]}
    fail_opens = fail_open_count(installed) - before
    pods = get(installed, "pods", "-n", LOAD_NS)["items"]
    unhinted = [
        p["metadata"]["name"] for p in pods if HINTS not in (p["metadata"].get("annotations") or {})
    ]
    print(
        f"upgrade under load: {len(stream.created)} pods created at 10/s,"
        f" {len(stream.failed)} creates failed, {fail_opens:.0f} fail-opens,"
        f" {len(unhinted)} pods without hints"
    )
    assert before_pods.isdisjoint(after_pods), "the upgrade did not roll the webhook pods"
    assert len(stream.created) >= 50
    assert stream.failed == []
    assert fail_opens == 0
    assert unhinted == []


def test_auto_mode_compiles_by_discovery(installed: LocalCluster) -> None:
    """`admission.mode=auto` on an apiserver that serves MutatingAdmissionPolicy v1: helm
    sees it by discovery, the controller compiles the policy in-cluster, narrows the
    chart's webhook, and a new pod is hinted without the webhook being called."""
    if not installed.serves_admission_policies():
        pytest.skip("this apiserver does not serve admissionregistration.k8s.io/v1 MAPs")
    chart.install(installed.kubeconfig, VALUES, "admission.mode=auto", upgrade=True)
    (deployment,) = [
        d
        for d in get(installed, "deployments", "-n", NS)["items"]
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == "operator"
    ]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--admission-mode=policy" in args

    def compiled() -> dict[str, Any] | None:
        status = get(installed, "spol", "incluster-apps").get("status", {})
        path = (status.get("admission") or {}).get("path")
        return status if path == "MutatingAdmissionPolicy" else None

    status = wait_until(compiled, within=90, what="incluster-apps compiled in-cluster")
    name = status["admission"]["policyObject"]
    config = get(installed, "mutatingwebhookconfiguration", SINGLETON)
    stored = get(installed, "mutatingadmissionpolicy", name)
    assert [o["uid"] for o in stored["metadata"]["ownerReferences"]] == [config["metadata"]["uid"]]

    def narrowed() -> bool:
        (hook,) = get(installed, "mutatingwebhookconfiguration", SINGLETON)["webhooks"]
        return [c["expression"] for c in hook.get("matchConditions", [])] == ["false"]

    wait_until(narrowed, within=60, what="the chart's webhook narrowed to no pod")
    time.sleep(5)  # the apiserver reloads the configuration from its own watch
    before = webhook_mutations(installed.audit_log, APP_NS)
    replicas = get(installed, "deployment", "gpu", "-n", APP_NS)["spec"]["replicas"]
    installed.kubectl("apply", "-f", "-", objects=[gpu_deployment(replicas + 1)])
    pods = bound_pods(installed, APP_NS, replicas + 1)
    newest = max(pods, key=lambda p: p["metadata"]["creationTimestamp"])
    hints = json.loads(newest["metadata"]["annotations"][HINTS])
    assert hints["policy"] == "incluster-apps"
    assert {"schedulerName", "gpuAffinity"} <= set(hints["injected"])
    assert newest["spec"]["schedulerName"] == SCHEDULER
    # Hinted inside the apiserver: no webhook call mutated it.
    assert webhook_mutations(installed.audit_log, APP_NS) == before


def test_the_controller_warns_before_its_memory_limit(installed: LocalCluster) -> None:
    """The controller reads its memory limit from the cgroup the kubelet made for its
    container on the real node, and warns on every policy when it is near it. Told to warn at
    1% of the chart's 512Mi limit, both replicas do at once."""
    chart.install(
        installed.kubeconfig,
        VALUES,
        "admission.mode=auto",  # as the test before left it
        "operator.memoryNearRatio=0.01",
        upgrade=True,
    )
    pods = {p["metadata"]["name"] for p in component_pods(installed)["operator"]}

    def warned() -> list[dict[str, Any]] | None:
        events = get(
            installed, "events", "-n", "default", "--field-selector", "reason=MemoryNearLimit"
        )
        mine = [e for e in events["items"] if any(e["message"].startswith(p) for p in pods)]
        policies = {e["involvedObject"]["name"] for e in mine}
        return mine if policies >= {"incluster-apps"} else None

    try:
        events = wait_until(warned, within=90, what="MemoryNearLimit Events on the policies")
    except AssertionError as err:
        logs = installed.kubectl(
            "logs", "-n", NS, "-l", "app.kubernetes.io/component=operator", "--tail=20"
        )
        raise AssertionError(f"{err}; the controllers' logs:\n{logs}") from None
    print(f"memory guard: {events[0]['message']}")
    for event in events:
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "SchedulingPolicy"
        # The limit is the container's own, as the kernel enforces it.
        assert "of the cgroup limit of 512 MiB" in event["message"]
    chart.install(installed.kubeconfig, VALUES, "admission.mode=auto", upgrade=True)


# ---- uninstall, and a broken install ---------------------------------------------------------


def test_uninstall_removes_the_chart_and_pod_creation_goes_on(installed: LocalCluster) -> None:
    """`helm uninstall` removes the chart's pods, its webhook configuration and the compiled
    policies, and pods are still created, unhinted."""
    chart.uninstall(installed.kubeconfig)
    wait_until(
        lambda: not get(installed, "pods", "-n", NS)["items"] or None,
        within=90,
        what="every chart pod to go",
    )
    # The compiled policies go with the webhook configuration that owns them.
    wait_until(
        lambda: (
            not [
                m
                for m in installed.kubectl("get", "mutatingadmissionpolicies", "-o", "name").split()
                if "schedpolicy-hints-" in m
            ]
            or None
        ),
        within=60,
        what="the compiled MutatingAdmissionPolicies to go",
    )
    names = [
        c["metadata"]["name"] for c in get(installed, "mutatingwebhookconfigurations")["items"]
    ]
    assert not [n for n in names if n.startswith("schedpolicy")], names
    installed.kubectl(
        "run",
        "after",
        "-n",
        APP_NS,
        f"--image={PAUSE_IMAGE}",
        "--overrides",
        json.dumps({"spec": {"nodeSelector": {"type": "kwok"}}}),
    )
    pod = get(installed, "pod", "after", "-n", APP_NS)
    assert HINTS not in (pod["metadata"].get("annotations") or {})


def test_an_install_with_a_missing_image_fails_naming_the_pod_and_the_reason(
    installed: LocalCluster,
) -> None:
    """An install whose image is not on the node fails, and the error names the pod and
    ErrImageNeverPull."""
    with pytest.raises(chart.InstallError) as failed:
        chart.install(installed.kubeconfig, VALUES, "image.tag=no-such-tag", wait="45s")
    message = str(failed.value)
    print(message)
    assert "ErrImageNeverPull" in message
    assert f"pod {chart.RELEASE}-" in message
