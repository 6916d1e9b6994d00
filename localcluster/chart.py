"""The Helm chart as the local cluster uses it: rendered with the real `helm template`.

The local secondary scheduler is started from what the chart renders: its RBAC
is applied to the cluster, it authenticates with a token of the chart's own
ServiceAccount, and its configuration is the chart's ConfigMap, changed only in
how it connects (the kubeconfig path). So the tests exercise the profile and
the permissions users install, not a copy of them.

A cluster comes up without helm (`make demo` does not build it): the templates it
applies are read from `chart-snapshot.yaml`, helm's own output for the chart's
defaults, written by `python -m localcluster snapshot-chart`. test_chart_render renders
them again with helm and fails if the snapshot is stale.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries

CHART = binaries.REPO / "chart"
RELEASE = "schedpolicy"
NAMESPACE = "schedpolicy-system"
SNAPSHOT = Path(__file__).with_name("chart-snapshot.yaml")
# The templates `LocalCluster.up` applies, with the chart's default values.
HARNESS_TEMPLATES = (
    "templates/scheduler/rbac.yaml",
    "templates/scheduler/configmap.yaml",
    "templates/operator/rbac.yaml",
    "templates/webhook/rbac.yaml",
    "templates/operator/admission-guard.yaml",
    "templates/webhook/configuration.yaml",
)


def kube_version() -> str:
    """The version `helm template` renders for: the Kubernetes under test."""
    return binaries.kube_version()


# MutatingAdmissionPolicy is served in admissionregistration.k8s.io/v1 from this release.
ADMISSION_POLICY_MINOR = 36


def _minor(version: str) -> int:
    return int(version.lstrip("v").split(".")[1])


def capability_flags(kube: str) -> list[str]:
    """`helm template` knows only its built-in API versions, which lack MutatingAdmissionPolicy
    v1; a cluster of this release serves it by default, and helm install sees it by
    discovery. These flags tell helm template so."""
    if _minor(kube) >= ADMISSION_POLICY_MINOR:
        return ["--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"]
    return []


def render(
    *show_only: str,
    namespace: str = NAMESPACE,
    values: dict[str, Any] | None = None,
    kube: str | None = None,
) -> list[dict[str, Any]]:
    argv = [
        str(binaries.path("helm")),
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        namespace,
        "--kube-version",
        kube or kube_version(),
    ]
    argv += capability_flags(kube or kube_version())
    for template in show_only:
        argv += ["--show-only", template]
    if values:
        argv += ["--values", "-"]
    proc = subprocess.run(
        argv,
        input=json.dumps(values) if values else None,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"helm template failed: {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _stable(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parts of a render that do not change from one run to the next: the chart makes
    a new webhook CA each time, and the harness brings its own."""
    kept = [d for d in docs if d["kind"] != "Secret"]
    for doc in kept:
        for hook in doc.get("webhooks", []):
            hook.get("clientConfig", {}).pop("caBundle", None)
    return kept


def snapshot_from_helm() -> dict[str, list[dict[str, Any]]]:
    # For the target release, whichever lane runs: one snapshot serves every lane.
    target = binaries.pinned_kubernetes()
    return {t: _stable(render(t, kube=target)) for t in HARNESS_TEMPLATES}


def write_snapshot() -> Path:
    header = (
        "# helm template of the chart's defaults, for the templates the local cluster applies.\n"
        "# Made by `python -m localcluster snapshot-chart`; test_chart_render keeps it current.\n"
    )
    SNAPSHOT.write_text(header + yaml.safe_dump(snapshot_from_helm(), sort_keys=True))
    return SNAPSHOT


def rendered(*templates: str) -> list[dict[str, Any]]:
    """What `helm template` renders for these templates with the chart's defaults, from the
    snapshot, so that a cluster comes up without helm."""
    snapshot = yaml.safe_load(SNAPSHOT.read_text())
    unknown = [t for t in templates if t not in snapshot]
    if unknown:
        raise KeyError(f"{SNAPSHOT.name} has no {', '.join(unknown)}; add it to HARNESS_TEMPLATES")
    return [doc for t in templates for doc in snapshot[t]]


def scheduler_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    return dict(yaml.safe_load(configmap["data"]["config.yaml"]))


class InstallError(RuntimeError):
    pass


def helm(kubeconfig: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binaries.path("helm")), f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def install(
    kubeconfig: Path,
    values: Path,
    *sets: str,
    upgrade: bool = False,
    wait: str = "240s",
    more_values: tuple[Path, ...] = (),
) -> None:
    """`helm install` (or `upgrade`) of this chart with `--wait`. When it fails, the error
    names each pod of the release that is not Ready and why, from the pod's own status:
    helm's message says only that a Deployment was not ready in time."""
    argv = [
        "upgrade" if upgrade else "install",
        RELEASE,
        str(CHART),
        f"--namespace={NAMESPACE}",
        "--create-namespace",
        f"--values={values}",
        *(f"--values={v}" for v in more_values),
        "--wait",
        f"--timeout={wait}",
    ]
    for item in sets:
        argv += ["--set", item]
    proc = helm(kubeconfig, *argv)
    if proc.returncode != 0:
        reasons = unready_pods(kubeconfig)
        raise InstallError(
            f"helm {argv[0]} failed: {proc.stderr.strip()}"
            + "".join(f"\n  {line}" for line in reasons)
        )


def uninstall(kubeconfig: Path) -> None:
    proc = helm(kubeconfig, "uninstall", RELEASE, f"--namespace={NAMESPACE}", "--wait")
    if proc.returncode != 0 and "not found" not in proc.stderr:
        raise InstallError(f"helm uninstall failed: {proc.stderr.strip()}")


def unready_pods(kubeconfig: Path) -> list[str]:
    """One line per pod of the release namespace that is not Ready: which container waits
    or failed, with the kubelet's reason and message."""
    proc = _kubectl(kubeconfig, "get", "pods", "-o", "json")
    if proc.returncode != 0:
        return [f"(pods unreadable: {proc.stderr.strip()})"]
    lines = []
    for pod in json.loads(proc.stdout)["items"]:
        status = pod.get("status", {})
        if any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
        ):
            continue
        name = pod["metadata"]["name"]
        why = [
            f"container {c['name']}: {state['reason']}: {state.get('message', '')}".rstrip(": ")
            for c in status.get("containerStatuses", [])
            for state in (
                c.get("state", {}).get("waiting") or c.get("state", {}).get("terminated") or {},
            )
            if state.get("reason")
        ]
        unscheduled = [
            f"{c['reason']}: {c.get('message', '')}"
            for c in status.get("conditions", [])
            if c["type"] == "PodScheduled" and c["status"] != "True"
        ]
        probes = _probe_failures(kubeconfig, name)
        detail = "; ".join(why + unscheduled + probes) or status.get("phase", "unknown")
        lines.append(f"pod {name}: {detail}")
        for c in status.get("containerStatuses", []):
            if c.get("restartCount", 0) > 0:
                lines += [f"    {line}" for line in _last_words(kubeconfig, name, c["name"])]
    return lines


def _probe_failures(kubeconfig: Path, pod: str) -> list[str]:
    """The kubelet's latest probe failure for a pod that runs but is not Ready."""
    proc = _kubectl(
        kubeconfig,
        *("get", "events", "-o", "json"),
        f"--field-selector=involvedObject.name={pod},reason=Unhealthy",
    )
    events = json.loads(proc.stdout)["items"] if proc.returncode == 0 else []
    return [events[-1]["message"]] if events else []


def _last_words(kubeconfig: Path, pod: str, container: str) -> list[str]:
    """The end of a crashed container's previous log, through the kubelet."""
    proc = _kubectl(kubeconfig, "logs", pod, "-c", container, "--previous", "--tail=8")
    return (proc.stdout or proc.stderr).strip().splitlines()


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl in the release namespace; the caller reads the status."""
    argv = [str(binaries.path("kubectl")), f"--kubeconfig={kubeconfig}", f"--namespace={NAMESPACE}"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60)
