"""A real node next to the KWOK ones: containerd (with Debian's runc), the kubelet, kube-proxy
(nftables) and CNI bridge networking on the harness's own bridge.

Everything lives under `<workdir>/node`. The node joins with a client certificate from the
harness's CA (CN=system:node:<name>, so the Node authorizer applies), is labelled and tainted
so that nothing lands on it by accident, and runs the images `make image` exported, imported
into containerd with `ctr`. `teardown` undoes all of it, and works from a process other than
the one that started it (`localcluster down`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from localcluster import binaries, hostnet
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
PAUSE = "registry.k8s.io/pause:3.10.1"
RUNC = "/usr/sbin/runc"
PROCESSES = ("kube-proxy", "kubelet", "containerd")


class NodeError(RuntimeError):
    pass


def _kubeconfig(server: str, ca: Path, cert: Path, key: Path, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "node", "context": {"cluster": "local", "user": user}}],
        "current-context": "node",
    }


class RealNode:
    def __init__(self, workdir: Path, supervisor: Supervisor) -> None:
        self.dir = workdir / "node"
        self.pki = workdir / "pki"
        self.supervisor = supervisor
        self.net = hostnet.HostNetwork(workdir / "hostnet.json")
        self.containerd_sock = self.dir / "containerd" / "containerd.sock"
        self.runc_root = self.dir / "containerd" / "state" / "runc"

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
            pair = ca.issue(name, common_name=cn, groups=groups)
            config = _kubeconfig(server, ca.cert_path, pair.cert, pair.key, cn)
            (self.dir / f"{name}.kubeconfig").write_text(yaml.safe_dump(config))
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

    def start(self, node_ready: Callable[[], bool], timeout: float = 120) -> None:
        self._start_containerd()
        for image in IMAGES:
            archive = IMAGES_DIR / f"{image}.tar"
            if not archive.exists():
                raise NodeError(f"{archive} is missing: run `make image`")
            self.ctr("images", "import", "--local", str(archive), timeout=300)
        self._start_kubelet()
        self._wait(node_ready, "the kubelet's node to be Ready", "kubelet", timeout)
        self._start_kube_proxy()

    def ctr(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        proc = subprocess.run(
            [
                str(binaries.path("ctr")),
                f"--address={self.containerd_sock}",
                "--namespace=k8s.io",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def _wait(self, ready: Callable[[], bool], what: str, component: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            record = self.supervisor.get(component)
            if record is None or not record.alive():
                raise NodeError(f"{component} exited; see {self.supervisor.logs / component}.log")
            with contextlib.suppress(Exception):
                if ready():
                    return
            time.sleep(0.5)
        raise NodeError(
            f"timed out after {timeout}s waiting for {what}; see {self.supervisor.logs}"
        )

    def _start_containerd(self) -> None:
        base = self.dir / "containerd"
        config = f"""version = 3
root = "{base / "root"}"
state = "{base / "state"}"
[grpc]
  address = "{self.containerd_sock}"
[ttrpc]
  address = "{self.containerd_sock}.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{PAUSE}'
[plugins.'io.containerd.cri.v1.runtime']
  # Pod network namespaces under our state dir, not the host's /var/run/netns.
  netns_mounts_under_state_dir = true
  # This VM's root lacks CAP_SYS_RESOURCE, so no process may lower its OOM score: the
  # kubelet's negative scores for sandboxes would make runc fail to start any container.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = '{RUNC}'
      Root = '{self.runc_root}'
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['{binaries.path("cni")}']
    conf_dir = '{self.dir / "cni"}'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
"""
        (self.dir / "containerd.toml").write_text(config)
        (self.dir / "cni").mkdir(exist_ok=True)
        (self.dir / "cni" / "10-schedpolicy.conflist").write_text(
            json.dumps(_cni_config(self.dir / "cni-ipam"), indent=2)
        )
        self.supervisor.start(
            "containerd",
            [str(binaries.path("containerd")), f"--config={self.dir / 'containerd.toml'}"],
            # The runc shim is found on PATH, next to containerd.
            env={"PATH": f"{binaries.bin_dir()}:{os.environ.get('PATH', '')}"},
        )
        self._wait(
            lambda: self.ctr("version", timeout=5) != "",
            "containerd's socket",
            "containerd",
            60,
        )

    def _start_kubelet(self) -> None:
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This VM runs cgroup v1, which the kubelet refuses by default.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
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
        path = self.dir / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        self.supervisor.start(
            "kubelet",
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

    def _start_kube_proxy(self) -> None:
        healthz = free_port()
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "nftables",
            "clientConnection": {"kubeconfig": str(self.dir / "kube-proxy.kubeconfig")},
            "hostnameOverride": NAME,
            "clusterCIDR": str(hostnet.SUBNET),
            "healthzBindAddress": f"127.0.0.1:{healthz}",
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
        self.supervisor.start("kube-proxy", [str(binaries.path("kube-proxy")), f"--config={path}"])
        self._wait(
            lambda: _http_ok(f"http://127.0.0.1:{healthz}/healthz"), "kube-proxy", "kube-proxy", 60
        )

    # ---- teardown ---------------------------------------------------------------------------

    def teardown(self) -> None:
        """Stops the node and removes everything it made on this machine. Safe to repeat."""
        self.supervisor.stop("kube-proxy")
        self.supervisor.stop("kubelet")
        if self.supervisor.get("containerd") is not None:
            for line in self.ctr("tasks", "list", "--quiet", check=False, timeout=30).split():
                self.ctr("tasks", "kill", "--signal=SIGKILL", line, check=False)
        self._kill_runc_containers()
        self.supervisor.stop("containerd")
        self._kill_shims()
        self._unmount_all()
        hostnet.run(str(binaries.path("kube-proxy")), "--cleanup", check=False)
        for family in ("ip", "ip6"):
            hostnet.run("nft", "delete", "table", family, "kube-proxy", check=False)
        self.net.delete()
        _remove_cgroups()
        _remove_log_links(self.dir / "pod-logs")
        _remove_stale_shim_sockets()

    def _kill_runc_containers(self) -> None:
        if not self.runc_root.exists():
            return
        for namespace in self.runc_root.iterdir():
            listed = hostnet.run(RUNC, f"--root={namespace}", "list", "--quiet", check=False).stdout
            for container in listed.split():
                hostnet.run(RUNC, f"--root={namespace}", "kill", container, "KILL", check=False)
                hostnet.run(
                    RUNC, f"--root={namespace}", "delete", "--force", container, check=False
                )

    def _kill_shims(self) -> None:
        needle = f"-address {self.containerd_sock}"
        for pid_dir in Path("/proc").iterdir():
            if not pid_dir.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmdline = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "containerd-shim" in cmdline and needle in cmdline:
                    os.kill(int(pid_dir.name), signal.SIGKILL)

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


def _cni_config(ipam_dir: Path) -> dict[str, Any]:
    """The harness made the bridge and gave it the gateway address, so the plugin need not be
    the gateway: with isGateway it would turn on IP forwarding for the whole machine. No
    ipMasq either: nothing is masqueraded."""
    return {
        "cniVersion": "1.0.0",
        "name": "schedpolicy",
        "plugins": [
            {
                "type": "bridge",
                "bridge": hostnet.BRIDGE,
                "isGateway": False,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(hostnet.SUBNET), "gateway": hostnet.GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0", "gw": hostnet.GATEWAY}],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _http_ok(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(url, timeout=2) as resp:
        return bool(resp.status == 200)


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
