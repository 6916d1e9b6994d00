"""The real node's host network: one bridge and subnet that exist only while the cluster runs,
the global settings the kubelet changes, and a census of what a run may leave behind.

Nothing here routes or masquerades: IP forwarding stays off. Pods on the bridge reach the host
(the apiserver's forwarder, the kubelet) and each other; the host reaches them. Nothing else.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BRIDGE = "schedpolicy0"
SUBNET = ipaddress.ip_network("10.244.0.0/24")
GATEWAY = str(next(SUBNET.hosts()))
# The kubelet sets the first three globally unless it is told to refuse to start instead
# (protectKernelDefaults); the bridge plugin would set the last if it were the gateway.
SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward")
# Chains the kubelet (KUBE-*) and CNI plugins (CNI-*) create with iptables.
CHAIN = re.compile(r"\b(KUBE|CNI)-[A-Z0-9-]+")


class HostNetError(RuntimeError):
    pass


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise HostNetError(f"{' '.join(argv)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _sysctl(path: str) -> Path:
    return Path("/proc/sys") / path


@dataclass
class HostNetwork:
    """The bridge, and the sysctl values to restore, recorded in `state` so that a later
    process (`localcluster down`) can undo what an earlier one did."""

    state: Path

    def create(self) -> None:
        routes = json.loads(run("ip", "-j", "route").stdout or "[]")
        taken = [r for r in routes if r.get("dev") != BRIDGE and _overlaps(r.get("dst", ""))]
        if taken:
            raise HostNetError(f"{SUBNET} is already routed on this machine: {taken}")
        if not self.state.exists():
            saved = {p: _sysctl(p).read_text().strip() for p in SYSCTLS}
            self.state.write_text(json.dumps(saved))
        if run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
            run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "replace", f"{GATEWAY}/{SUBNET.prefixlen}", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")

    def delete(self) -> None:
        for veth in veths():
            run("ip", "link", "delete", veth, check=False)
        run("ip", "link", "delete", BRIDGE, check=False)
        delete_chains()
        if self.state.exists():
            for path, value in json.loads(self.state.read_text()).items():
                _sysctl(path).write_text(value)
            self.state.unlink()


def _overlaps(dst: str) -> bool:
    if dst in ("", "default"):
        return False
    try:
        return ipaddress.ip_network(dst, strict=False).overlaps(SUBNET)
    except ValueError:
        return False


def veths() -> list[str]:
    """Host ends of the pods' veth pairs still attached to the bridge."""
    links = json.loads(
        run("ip", "-j", "link", "show", "master", BRIDGE, check=False).stdout or "[]"
    )
    return [link["ifname"] for link in links]


def _iptables() -> list[str]:
    return [
        t
        for t in ("iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy")
        if shutil.which(t)
    ]


def delete_chains() -> None:
    """The KUBE-* and CNI-* chains, in every table, for IPv4 and IPv6, nft and legacy: first
    the jumps to them from the built-in chains, then their rules, then the chains."""
    for tool in _iptables():
        for table in ("filter", "nat", "mangle"):
            listed = run(tool, "-t", table, "-S", check=False).stdout.splitlines()
            ours = [line[3:] for line in listed if line.startswith("-N ") and CHAIN.match(line[3:])]
            for line in listed:
                words = shlex.split(line)
                if words[:1] == ["-A"] and words[1] not in ours and CHAIN.search(line):
                    run(tool, "-t", table, "-D", *words[1:], check=False)
            for chain in ours:
                run(tool, "-t", table, "-F", chain, check=False)
            for chain in ours:
                run(tool, "-t", table, "-X", chain, check=False)


def leftovers(workdir: Path | None = None) -> list[str]:
    """What a run of the real node would have left on this machine, one line each."""
    found: list[str] = []
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        found.append(f"link {BRIDGE}")
    for tool in _iptables():
        saved = run(f"{tool}-save", check=False).stdout if shutil.which(f"{tool}-save") else ""
        chains = sorted({m.group(0) for m in CHAIN.finditer(saved)})
        found += [f"{tool}: {chain}" for chain in chains]
    if shutil.which("nft"):
        tables = run("nft", "list", "tables", check=False).stdout
        found += [f"nft {line.strip()}" for line in tables.splitlines() if "kube-proxy" in line]
    for line in Path("/proc/mounts").read_text().splitlines():
        target = line.split()[1]
        if target.startswith("/run/containerd") or (
            workdir is not None and target.startswith(str(workdir))
        ):
            found.append(f"mount {target}")
    for controller in Path("/sys/fs/cgroup").iterdir():
        if (controller / "kubepods").exists():
            found.append(f"cgroup {controller / 'kubepods'}")
    found += [f"log link {p}" for p in Path("/var/log/containers").glob("*.log")]
    return found
