"""The one place that builds kubeconfigs and the clients that use them.

The admin's and each component's kubeconfig present a client certificate from the harness's
CA; a ServiceAccount's presents a token of that account, so that what runs with it has
exactly the RBAC the chart gives it. `Clients` runs kubectl as the admin and makes the
admin's SSL context, for tests that talk to the apiserver themselves.
"""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries, chart
from localcluster.component import ClusterError
from localcluster.pki import Authority, KeyPair

CONTEXT = "schedpolicy-local"
# Common name and groups of each client certificate, by kubeconfig (`admin` is the admin's,
# `<workdir>/kubeconfig`; the others are `<workdir>/<name>.kubeconfig`).
IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    # The admin, and the components that in a real cluster get broad rights.
    "admin": ("schedpolicy-admin", ("system:masters",)),
    "kube-controller-manager": ("system:kube-controller-manager", ("system:masters",)),
    "kwok": ("kwok-controller", ("system:masters",)),
    # Karpenter's chart grants it nodes, nodeclaims, pods/eviction and more; the
    # harness does not re-create that RBAC, which is not what is under test.
    "karpenter": ("karpenter", ("system:masters",)),
    # The scheduler gets only what upstream's bootstrap RBAC grants it.
    "kube-scheduler": ("system:kube-scheduler", ()),
}


def kubectl_input(objects: Iterable[Mapping[str, Any]]) -> str:
    """Objects as a stream of JSON documents. Not YAML: PyYAML leaves a string such as
    `1234e5` (a random hex tag) unquoted, and kubectl's YAML reader takes it for a number.
    Not one `List` either: kubectl validates a List's items on the client, with messages
    that no longer name the field the way the apiserver does."""
    return "\n".join(json.dumps(o) for o in objects) + "\n"


def _config(
    server: str, ca: Path, user: str, credentials: dict[str, str], context: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": "local", "user": user}}],
        "current-context": context,
    }


def client_kubeconfig(
    server: str, ca: Path, client: KeyPair, user: str, context: str = CONTEXT
) -> dict[str, Any]:
    credentials = {"client-certificate": str(client.cert), "client-key": str(client.key)}
    return _config(server, ca, user, credentials, context)


def token_kubeconfig(server: str, ca: Path, token: str, user: str) -> dict[str, Any]:
    return _config(server, ca, user, {"token": token}, user)


def issue(
    ca: Authority,
    name: str,
    common_name: str,
    groups: tuple[str, ...],
    server: str,
    target: Path,
    context: str = CONTEXT,
) -> Path:
    """A client certificate `name` from `ca`, and at `target` a kubeconfig that presents it."""
    pair = ca.issue(name, common_name=common_name, groups=groups)
    config = client_kubeconfig(server, ca.cert_path, pair, common_name, context)
    target.write_text(yaml.safe_dump(config))
    return target


class Clients:
    """The credentials in a cluster's work directory, and the clients built on them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.pki = workdir / "pki"
        self.admin = workdir / "kubeconfig"

    def path(self, name: str) -> Path:
        """The kubeconfig of a component or of a ServiceAccount's process."""
        return self.admin if name == "admin" else self.workdir / f"{name}.kubeconfig"

    def write_identities(self, ca: Authority, server: str) -> None:
        for name, (cn, groups) in IDENTITIES.items():
            issue(ca, name, cn, groups, server, self.path(name)).chmod(0o600)

    def service_account(
        self, server: str, account: str, file_stem: str, namespace: str = chart.NAMESPACE
    ) -> Path:
        """A kubeconfig that authenticates with a token of this ServiceAccount."""
        token = self.kubectl("create", "token", account, "-n", namespace, "--duration=48h").strip()
        kubeconfig = self.path(file_stem)
        kubeconfig.write_text(
            yaml.safe_dump(token_kubeconfig(server, self.pki / "ca.crt", token, account))
        )
        kubeconfig.chmod(0o600)
        return kubeconfig

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        objects: Iterable[Mapping[str, Any]] | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> str:
        """Run kubectl as the admin; `objects` are sent as its `-f -` input."""
        if objects is not None:
            input = kubectl_input(objects)
        proc = subprocess.run(
            [str(binaries.path("kubectl")), f"--kubeconfig={self.admin}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout
