"""Where each pod is: by node, by ReplicaSet, or not bound yet, and each node's CPU fill."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Set

from schedpolicy.view.records import PodRecord

_NONE: frozenset[str] = frozenset()


class PodIndex:
    def __init__(self) -> None:
        self._by_node: dict[str, set[str]] = defaultdict(set)
        self._by_replicaset: dict[str, set[str]] = defaultdict(set)
        # Pods with no node yet: few in a healthy cluster, so scanning them is cheap.
        self._unbound: set[str] = set()
        self._requested_mcpu: dict[str, int] = defaultdict(int)

    def on_node(self, node: str) -> Set[str]:
        return self._by_node.get(node, _NONE)

    def in_replicaset(self, uid: str) -> Set[str]:
        return self._by_replicaset.get(uid, _NONE)

    def unbound(self) -> Set[str]:
        return self._unbound

    def requested_mcpu(self, node: str) -> int:
        return self._requested_mcpu.get(node, 0)

    def add(self, pod: PodRecord) -> None:
        if pod.node_name is None:
            self._unbound.add(pod.uid)
        else:
            self._by_node[pod.node_name].add(pod.uid)
            if pod.counts_toward_fill:
                self._requested_mcpu[pod.node_name] += pod.cpu_mcpu
        if pod.replicaset_uid is not None:
            self._by_replicaset[pod.replicaset_uid].add(pod.uid)

    def remove(self, pod: PodRecord) -> None:
        if pod.node_name is None:
            self._unbound.discard(pod.uid)
        else:
            _discard(self._by_node, pod.node_name, pod.uid)
            if pod.counts_toward_fill:
                self._requested_mcpu[pod.node_name] -= pod.cpu_mcpu
        if pod.replicaset_uid is not None:
            _discard(self._by_replicaset, pod.replicaset_uid, pod.uid)


def _discard(index: dict[str, set[str]], key: str, uid: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(uid)
        if not members:
            del index[key]
