"""The real node's container runtime: containerd with Debian's runc and the CNI bridge plugin,
its state, sockets and pod network namespaces all under `<workdir>/node/containerd`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from localcluster import binaries, hostnet
from localcluster.component import NodeError, wait_until
from localcluster.supervisor import Supervisor

PAUSE = "registry.k8s.io/pause:3.10.1"
RUNC = "/usr/sbin/runc"


class Containerd:
    name = "containerd"
    startup_timeout = 60

    def __init__(self, node_dir: Path, supervisor: Supervisor) -> None:
        self.node_dir = node_dir
        self.supervisor = supervisor
        self.base = node_dir / "containerd"
        self.sock = self.base / "containerd.sock"
        self.runc_root = self.base / "state" / "runc"

    def start(self) -> None:
        (self.node_dir / "containerd.toml").write_text(self._config())
        (self.node_dir / "cni").mkdir(exist_ok=True)
        (self.node_dir / "cni" / "10-schedpolicy.conflist").write_text(
            json.dumps(_cni_config(self.node_dir / "cni-ipam"), indent=2)
        )
        self.supervisor.start(
            self.name,
            [str(binaries.path("containerd")), f"--config={self.node_dir / 'containerd.toml'}"],
            # The runc shim is found on PATH, next to containerd.
            env={"PATH": f"{binaries.bin_dir()}:{os.environ.get('PATH', '')}"},
        )

    def ready(self, timeout: float) -> None:
        wait_until(
            self.supervisor,
            self.name,
            lambda: self.ctr("version", timeout=5) != "",
            "containerd's socket",
            timeout,
        )

    def _config(self) -> str:
        return f"""version = 3
root = "{self.base / "root"}"
state = "{self.base / "state"}"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
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
    conf_dir = '{self.node_dir / "cni"}'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
"""

    def ctr(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        proc = subprocess.run(
            [
                str(binaries.path("ctr")),
                f"--address={self.sock}",
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

    def stop(self) -> None:
        """Its containers killed first, and then the shims that outlive containerd."""
        if self.supervisor.get(self.name) is not None:
            for line in self.ctr("tasks", "list", "--quiet", check=False, timeout=30).split():
                self.ctr("tasks", "kill", "--signal=SIGKILL", line, check=False)
        self._kill_runc_containers()
        self.supervisor.stop(self.name)
        self._kill_shims()

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
        needle = f"-address {self.sock}"
        for pid_dir in Path("/proc").iterdir():
            if not pid_dir.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmdline = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "containerd-shim" in cmdline and needle in cmdline:
                    os.kill(int(pid_dir.name), signal.SIGKILL)


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
