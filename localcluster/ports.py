"""Free loopback ports, for the control plane's components and the processes under test."""

from __future__ import annotations

import socket
from dataclasses import dataclass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Ports:
    """The control plane's ports, as the state file records them."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    secondary_scheduler: int

    @classmethod
    def allocate(cls) -> Ports:
        ports: set[int] = set()
        while len(ports) < 7:
            ports.add(free_port())
        return cls(*sorted(ports))

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver}"
