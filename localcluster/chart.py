"""The Helm chart as the local cluster uses it: rendered with the real `helm template`.

The local secondary scheduler is started from what the chart renders: its RBAC
is applied to the cluster, it authenticates with a token of the chart's own
ServiceAccount, and its configuration is the chart's ConfigMap, changed only in
how it connects (the kubeconfig path). So the tests exercise the profile and
the permissions users install, not a copy of them.
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
KUBE_VERSION = "v1.35.4"


def render(
    *show_only: str, namespace: str = NAMESPACE, values: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    argv = [
        str(binaries.path("helm")),
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        namespace,
        "--kube-version",
        KUBE_VERSION,
    ]
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


def scheduler_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    return dict(yaml.safe_load(configmap["data"]["config.yaml"]))


def token_kubeconfig(server: str, ca: Path, token: str, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "local", "user": user}}],
        "current-context": user,
    }
