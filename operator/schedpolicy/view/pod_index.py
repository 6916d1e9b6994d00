"""Where each pod is: by node, by ReplicaSet, or not bound yet, and what each node's pods
request."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Set

from schedpolicy.view.records import PodRecord

_NONE: frozenset[str] = frozenset()
_NO_REQUESTS: Mapping[str, int] = {}


class PodIndex:
    def __init__(self) -> None:
        self._by_node: dict[str, set[str]] = defaultdict(set)
        self._by_replicaset: dict[str, set[str]] = defaultdict(set)
        # Pods with no node yet: few in a healthy cluster, so scanning them is cheap.
        self._unbound: set[str] = set()
        # node -> resource -> milli-units requested by the pods that count toward its fill
        self._requested: dict[str, dict[str, int]] = {}

    def on_node(self, node: str) -> Set[str]:
        return self._by_node.get(node, _NONE)

    def in_replicaset(self, uid: str) -> Set[str]:
        return self._by_replicaset.get(uid, _NONE)

    def unbound(self) -> Set[str]:
        return self._unbound

    def requested(self, node: str) -> Mapping[str, int]:
        return self._requested.get(node, _NO_REQUESTS)

    def add(self, pod: PodRecord) -> None:
        if pod.node_name is None:
            self._unbound.add(pod.uid)
        else:
            self._by_node[pod.node_name].add(pod.uid)
            if pod.counts_toward_fill:
                totals = self._requested.setdefault(pod.node_name, {})
                for name, amount in pod.requests.items():
                    totals[name] = totals.get(name, 0) + amount
        if pod.replicaset_uid is not None:
            self._by_replicaset[pod.replicaset_uid].add(pod.uid)

    def remove(self, pod: PodRecord) -> None:
        if pod.node_name is None:
            self._unbound.discard(pod.uid)
        else:
            _discard(self._by_node, pod.node_name, pod.uid)
            if pod.counts_toward_fill:
                self._release(pod.node_name, pod.requests)
        if pod.replicaset_uid is not None:
            _discard(self._by_replicaset, pod.replicaset_uid, pod.uid)

    def _release(self, node: str, requests: Mapping[str, int]) -> None:
        totals = self._requested.get(node)
        if totals is None:
            return
        for name, amount in requests.items():
            left = totals.get(name, 0) - amount
            if left:
                totals[name] = left
            else:
                totals.pop(name, None)
        if not totals:
            del self._requested[node]


def _discard(index: dict[str, set[str]], key: str, uid: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(uid)
        if not members:
            del index[key]
