"""A real node next to the KWOK ones: containerd (with Debian's runc), the kubelet, kube-proxy
(nftables) and CNI bridge networking on the harness's own bridge.

Everything lives under `<workdir>/node`. The node joins with a client certificate from the
harness's CA (CN=system:node:<name>, so the Node authorizer applies), is labelled and tainted
so that nothing lands on it by accident, and runs the images `make image` exported, imported
into containerd with `ctr`. `stop` undoes all of it, and works from a process other than
the one that started it (`localcluster down`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries, hostnet, kubeconfigs
from localcluster.component import NodeError, has_ready_condition, http_ok, launch, wait_until
from localcluster.containerd import RUNC as RUNC
from localcluster.containerd import Containerd
from localcluster.kubeconfigs import Clients
from localcluster.pki import Authority
from localcluster.ports import free_port
from localcluster.supervisor import Supervisor

NAME = "schedpolicy-node"
# Our own prefix: the kubelet refuses unknown kubernetes.io labels in --node-labels.
LABEL = "schedpolicy.io/real-node"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
IMAGES_DIR = binaries.REPO / ".tools" / "images"
IMAGES = (
    "pause",
    "schedpolicy-operator",
    "kube-scheduler",
    # The monitoring stack of tests/incluster/test_monitoring.py.
    "prometheus",
    "prometheus-operator",
    "prometheus-config-reloader",
)
PROCESSES = ("kube-proxy", "kubelet", "containerd")


class RealNode:
    """The node as one component: `prepare` before the control plane starts, `start` (each
    process waited for before the next, which needs it) after it."""

    name = "real-node"
    startup_timeout = 60

    def __init__(self, workdir: Path, supervisor: Supervisor, clients: Clients) -> None:
        self.dir = workdir / "node"
        self.pki = workdir / "pki"
        self.supervisor = supervisor
        self.net = hostnet.HostNetwork(workdir / "hostnet.json")
        self.containerd = Containerd(self.dir, supervisor)
        self.kubelet = Kubelet(self.dir, self.pki, supervisor, clients, self.containerd.sock)
        self.proxy = KubeProxy(self.dir, supervisor)
        self.containerd_sock = self.containerd.sock
        self.runc_root = self.containerd.runc_root

    # ---- before the control plane ---------------------------------------------------------

    def prepare(self, ca: Authority, server: str) -> None:
        """The bridge (the apiserver's forwarder binds to it), and the node's identities."""
        missing = [t for t in (RUNC, shutil.which("nft")) if not t or not os.access(t, os.X_OK)]
        if missing:
            raise NodeError("the real node needs runc and nftables: run `make tools`")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.net.create()
        for name, cn, groups in (
            ("kubelet", f"system:node:{NAME}", ("system:nodes",)),
            ("kube-proxy", "system:kube-proxy", ()),
        ):
            target = self.dir / f"{name}.kubeconfig"
            kubeconfigs.issue(ca, name, cn, groups, server, target, context="node")
        # The apiserver checks the kubelet's serving certificate, and authenticates to it.
        ca.issue("kubelet-serving", common_name=NAME, hosts=(hostnet.GATEWAY, NAME))
        ca.issue(
            "apiserver-kubelet-client", common_name="kube-apiserver", groups=("system:masters",)
        )

    def apiserver_args(self) -> list[str]:
        return [
            f"--kubelet-client-certificate={self.pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={self.pki / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={self.pki / 'ca.crt'}",
            # The node's name resolves nowhere; its address is the bridge's.
            "--kubelet-preferred-address-types=InternalIP",
        ]

    # ---- after it ---------------------------------------------------------------------------

    def start(self) -> None:
        launch(self.containerd)
        for image in IMAGES:
            archive = IMAGES_DIR / f"{image}.tar"
            if not archive.exists():
                raise NodeError(f"{archive} is missing: run `make image`")
            self.containerd.ctr("images", "import", "--local", str(archive), timeout=300)
        launch(self.kubelet)
        self.proxy.start()

    def ready(self, timeout: float) -> None:
        """kube-proxy, which starts last, serves its health check."""
        self.proxy.ready(timeout)

    # ---- teardown ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stops the node and removes everything it made on this machine. Safe to repeat."""
        self.proxy.stop()
        self.kubelet.stop()
        self.containerd.stop()
        self._unmount_all()
        hostnet.run(str(binaries.path("kube-proxy")), "--cleanup", check=False)
        for family in ("ip", "ip6"):
            hostnet.run("nft", "delete", "table", family, "kube-proxy", check=False)
        self.net.delete()
        _remove_cgroups()
        _remove_log_links(self.dir / "pod-logs")
        _remove_stale_shim_sockets()

    def _unmount_all(self) -> None:
        prefix = str(self.dir)
        for _ in range(3):
            targets = [
                line.split()[1]
                for line in Path("/proc/mounts").read_text().splitlines()
                if line.split()[1].startswith(prefix)
            ]
            if not targets:
                return
            for target in sorted(targets, key=len, reverse=True):
                hostnet.run("umount", "--lazy", target, check=False)


class Kubelet:
    """Ready when its Node is."""

    name = "kubelet"
    startup_timeout = 120

    def __init__(
        self, node_dir: Path, pki: Path, supervisor: Supervisor, clients: Clients, sock: Path
    ) -> None:
        self.dir, self.pki, self.sock = node_dir, pki, sock
        self.supervisor = supervisor
        self.clients = clients

    def start(self) -> None:
        path = self.dir / "kubelet.yaml"
        path.write_text(yaml.safe_dump(self._config()))
        self.supervisor.start(
            self.name,
            [
                str(binaries.path("kubelet")),
                f"--config={path}",
                f"--kubeconfig={self.dir / 'kubelet.kubeconfig'}",
                f"--root-dir={self.dir / 'kubelet'}",
                f"--hostname-override={NAME}",
                f"--node-ip={hostnet.GATEWAY}",
                f"--node-labels={LABEL}=true",
                "--v=1",
            ],
        )

    def _config(self) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This VM runs cgroup v1, which the kubelet refuses by default.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.sock}",
            "address": hostnet.GATEWAY,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(self.pki / "kubelet-serving.crt"),
            "tlsPrivateKeyFile": str(self.pki / "kubelet-serving.key"),
            "rotateCertificates": False,
            "registerWithTaints": [TAINT],
            "podLogsDir": str(self.dir / "pod-logs"),
            "volumePluginDir": str(self.dir / "volume-plugins"),
            # No resolver inside pods: nothing they do should leave this machine.
            "resolvConf": "",
            "clusterDomain": "cluster.local",
            "protectKernelDefaults": False,
            # Images cannot be pulled again here, and the shared disk looks fuller than it is.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "maxPods": 40,
            "serializeImagePulls": False,
        }

    def ready(self, timeout: float) -> None:
        wait_until(
            self.supervisor, self.name, self._node_ready, "the kubelet's node to be Ready", timeout
        )

    def _node_ready(self) -> bool:
        listed = self.clients.kubectl("get", "node", NAME, "-o", "json", check=False)
        return bool(listed) and has_ready_condition(json.loads(listed))

    def stop(self) -> None:
        self.supervisor.stop(self.name)


class KubeProxy:
    name = "kube-proxy"
    startup_timeout = 60

    def __init__(self, node_dir: Path, supervisor: Supervisor) -> None:
        self.dir = node_dir
        self.supervisor = supervisor
        self.healthz = 0  # chosen by `start`

    def start(self) -> None:
        self.healthz = free_port()
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "nftables",
            "clientConnection": {"kubeconfig": str(self.dir / "kube-proxy.kubeconfig")},
            "hostnameOverride": NAME,
            "clusterCIDR": str(hostnet.SUBNET),
            "healthzBindAddress": f"127.0.0.1:{self.healthz}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{hostnet.GATEWAY}/32"],
            # Zeroes leave the machine's conntrack settings alone.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        }
        path = self.dir / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        self.supervisor.start(self.name, [str(binaries.path("kube-proxy")), f"--config={path}"])

    def ready(self, timeout: float) -> None:
        url = f"http://127.0.0.1:{self.healthz}/healthz"
        wait_until(self.supervisor, self.name, lambda: http_ok(url, None, 2), self.name, timeout)

    def stop(self) -> None:
        self.supervisor.stop(self.name)


def _remove_cgroups() -> None:
    """The kubelet's kubepods hierarchy in every v1 controller, deepest first."""
    for controller in Path("/sys/fs/cgroup").iterdir():
        top = controller / "kubepods"
        if not top.is_dir():
            continue
        dirs = sorted(
            (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        )
        for d in [*dirs, top]:
            with contextlib.suppress(OSError):
                d.rmdir()


def _remove_log_links(pod_logs: Path) -> None:
    """The kubelet always links /var/log/containers/*.log to the pod logs it keeps."""
    links = Path("/var/log/containers")
    if not links.is_dir():
        return
    for link in links.iterdir():
        if link.is_symlink() and str(os.readlink(link)).startswith(str(pod_logs)):
            link.unlink()


def _remove_stale_shim_sockets() -> None:
    """containerd puts shim sockets in /run/containerd/s whatever its state dir says; the
    ones nothing listens on any more are ours, left by killed shims."""
    shims = Path("/run/containerd/s")
    if not shims.is_dir():
        return
    for path in shims.iterdir():
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(path))
            except OSError:
                path.unlink(missing_ok=True)
