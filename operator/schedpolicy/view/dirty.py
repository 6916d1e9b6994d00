"""What the next reconcile pass must look at: the pods and nodes that changes touched."""

from __future__ import annotations

from schedpolicy.view.cluster import Affected, ClusterView


class Dirty:
    def __init__(self) -> None:
        self._affected = Affected()
        # Everything, as at the start of a term or after a policy changed.
        self._all_pods = True
        self._all_nodes = True

    def everything(self) -> None:
        self._all_pods = self._all_nodes = True

    def add(self, affected: Affected) -> None:
        self._affected.merge(affected)

    def pending_pod(self, uid: str) -> bool:
        return self._all_pods or uid in self._affected.pods

    def take_label_nodes(self, view: ClusterView) -> set[str]:
        """The nodes whose labels to plan, forgotten now."""
        if self._all_nodes:
            self._all_nodes = False
            self._affected.label_nodes.clear()
            return view.node_names()
        names, self._affected.label_nodes = self._affected.label_nodes, set()
        return names

    def take_pods(self, view: ClusterView) -> set[str]:
        """The pods whose costs to plan (those on a touched node too, and those of a
        touched ReplicaSet that its new zone spread moves), forgotten now."""
        affected = self._affected
        self._affected = Affected(label_nodes=affected.label_nodes)
        if self._all_pods or affected.all_pods:
            self._all_pods = False
            view.replanning_all()
            return set(view.pods)
        uids = set(affected.pods)
        for node in affected.nodes:
            uids |= view.pods_on_node(node)
        for rs in affected.replicasets:
            uids |= view.respread(rs)
        return uids
