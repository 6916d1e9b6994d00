"""What the webhook process knows of the cluster: policies, namespace labels, and the
instance type of each node. Fed by its informers (webhook.py); no I/O.

Much smaller than the controller's ClusterView on purpose: admission reads no pods and
no node status, so the webhook holds nothing per pod and only a name per node.
"""

from __future__ import annotations

from collections.abc import Mapping

from schedpolicy.core.policy.matching import Policy
from schedpolicy.core.wellknown import INSTANCE_TYPE_LABEL
from schedpolicy.view import wire
from schedpolicy.view.records import SHARED, PolicyObject, policy_object


class AdmissionView:
    def __init__(self) -> None:
        self._policies: dict[str, PolicyObject] = {}
        self._parsed: list[Policy] = []
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._instance_type: dict[str, str] = {}  # node name -> its instance type
        self._instance_types: frozenset[str] | None = None

    # -- what admission reads

    @property
    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        return self._namespaces

    def policies(self) -> list[Policy]:
        return self._parsed

    def policy_objects(self) -> list[PolicyObject]:
        return sorted(self._policies.values(), key=lambda p: p.name)

    def instance_types(self) -> frozenset[str]:
        if self._instance_types is None:
            self._instance_types = frozenset(self._instance_type.values())
        return self._instance_types

    # -- what the informers deliver

    def upsert_policy(self, obj: wire.SchedulingPolicy) -> PolicyObject:
        meta = obj.metadata
        body = {
            "metadata": {"name": meta.name, "uid": meta.uid, "generation": meta.generation},
            "spec": obj.spec or {},
        }
        parsed = policy_object(body)
        self._policies[parsed.name] = parsed
        self._reparse()
        return parsed

    def remove_policy(self, name: str) -> None:
        self._policies.pop(name, None)
        self._reparse()

    def _reparse(self) -> None:
        self._parsed = [o.policy for o in self.policy_objects() if o.policy is not None]

    def upsert_namespace(self, name: str, labels: Mapping[str, str] | None) -> None:
        self._namespaces[SHARED.text(name)] = SHARED.mapping(labels)

    def remove_namespace(self, name: str) -> None:
        self._namespaces.pop(name, None)

    def namespace_names(self) -> list[str]:
        return list(self._namespaces)

    def upsert_node(self, name: str, labels: Mapping[str, str] | None) -> None:
        kind = (labels or {}).get(INSTANCE_TYPE_LABEL)
        if kind is None:
            if self._instance_type.pop(name, None) is not None:
                self._instance_types = None
        elif self._instance_type.get(name) != kind:
            self._instance_type[SHARED.text(name)] = SHARED.text(kind)
            self._instance_types = None

    def remove_node(self, name: str) -> None:
        if self._instance_type.pop(name, None) is not None:
            self._instance_types = None

    def node_names(self) -> set[str]:
        return set(self._instance_type)
