"""Which instance types hold the GPUs a placement asks for, and whether a pod that asks can
run at all. Pure.

A required affinity on the operator's own labels (`<prefix>/gpu-model In [A100]`) matches
only nodes that exist and carry them. A node autoscaler that launches nodes for pending
pods cannot promise a label it does not write: Karpenter refuses a required term on a key
that no NodePool defines ("label ... does not have known values"), and the pod waits for
ever. What Karpenter does know is the instance type, a well-known label of every node it
launches. So the hint ORs a second term in: the instance types of the verified table that
hold the model with the memory asked for, on nodes Karpenter launched
(`karpenter.sh/nodepool` exists) that carry no GPU label of ours yet. Karpenter tries a
pod's required terms in order and drops the first while more than one is left, so the
label term stays first and the nodes already labelled are used before new ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schedpolicy.core.gpu.instance_table import INSTANCE_TYPES, InstanceGPUs
from schedpolicy.core.wellknown import INSTANCE_TYPE_LABEL, KARPENTER_NODEPOOL_LABEL


def instance_types_for(
    models: Iterable[str],
    min_memory_mib: int,
    table: Mapping[str, InstanceGPUs] = INSTANCE_TYPES,
) -> tuple[str, ...]:
    """The table's instance types whose GPUs are one of `models` with at least
    `min_memory_mib` each. Models compare exactly, as the label term compares them."""
    wanted = set(models)
    return tuple(
        sorted(
            name
            for name, gpus in table.items()
            if gpus.model in wanted and gpus.memory_mib >= min_memory_mib
        )
    )


def launch_term(types: Sequence[str], model_key: str) -> list[dict[str, Any]]:
    """The match expressions of the term a node autoscaler can provision: one of `types`,
    launched by Karpenter, not yet labelled by us (once labelled, the label term decides)."""
    return [
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": list(types)},
        {"key": KARPENTER_NODEPOOL_LABEL, "operator": "Exists"},
        {"key": model_key, "operator": "DoesNotExist"},
    ]


@dataclass(frozen=True)
class GPUSupply:
    """What can take a GPU placement's pods: labelled nodes now, and instance types an
    autoscaler may launch."""

    models: tuple[str, ...]
    min_memory_mib: int
    instance_types: tuple[str, ...]
    labelled_nodes: int  # nodes whose labels satisfy the label term

    def condition(self) -> tuple[str, str, str]:
        """(status, reason, message) of the policy's Provisionable condition."""
        asked = f"{' or '.join(self.models)} with at least {self.min_memory_mib} MiB a GPU"
        nodes = f"{self.labelled_nodes} labelled node(s) match now"
        if self.instance_types:
            return (
                "True",
                "InstanceTypesKnown",
                f"pods asking for {asked} can run on labelled nodes ({nodes}) or on new nodes"
                f" of {', '.join(self.instance_types)} (the verified instance-type table),"
                " which Karpenter can launch",
            )
        if self.labelled_nodes:
            return (
                "True",
                "LabelledNodesOnly",
                f"no instance type in the verified table holds {asked}: only labelled nodes"
                f" can take these pods ({nodes}), and Karpenter cannot launch more",
            )
        return (
            "False",
            "NoInstanceType",
            f"no node is labelled with {asked}, and no instance type in the verified table"
            " holds it: these pods stay Pending, and Karpenter cannot launch a node for them",
        )


def labelled_matches(
    labels: Mapping[str, str], model_key: str, memory_key: str, models: Iterable[str], least: int
) -> bool:
    """Whether a node's labels satisfy the label term (model In models, memory Gt least-1)."""
    if labels.get(model_key) not in set(models):
        return False
    memory = labels.get(memory_key, "")
    return memory.isdigit() and int(memory) >= least
