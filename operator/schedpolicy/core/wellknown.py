"""The keys, labels and names that schedpolicy shares with Kubernetes and its ecosystem.

Each is defined here once. A second spelling of a key elsewhere is how a reader and a writer
drift apart: one module writes a key that another no longer reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The identity of every write, so that managedFields say which values are ours.
FIELD_MANAGER = "schedpolicy"

# What the ReplicaSet controller reads when it picks which pods to delete.
COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
# What Karpenter (v1.15+) reads first when it prices a pod's eviction for consolidation.
KARPENTER_COST_ANNOTATION = "karpenter.sh/disruption-cost"
# Our own keys.
HINTS_ANNOTATION = "schedpolicy.io/hints"
OWNED_LABELS_ANNOTATION = "schedpolicy.io/owned-labels"
IGNORE_LABEL = "schedpolicy.io/ignore"
# The chart's own pods, by the labels it gives them: never hinted, even with the ignore label
# stripped (the scheduler would wait on its own profile).
PRODUCT_NAME = ("app.kubernetes.io/name", "schedpolicy")
PRODUCT_COMPONENTS = frozenset({"operator", "scheduler", "webhook"})

# Well-known node labels (kubernetes.io/docs/reference/labels-annotations-taints).
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# Which capacity a node runs on, as Karpenter and EKS managed node groups say it.
KARPENTER_CAPACITY_LABEL = "karpenter.sh/capacity-type"
EKS_CAPACITY_LABEL = "eks.amazonaws.com/capacityType"
# Every node Karpenter launches carries its NodePool's name.
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
# The field manager the apiserver records for Karpenter's own patches: its client's user agent
# is "karpenter/<version>" on every cloud provider (sigs.k8s.io/karpenter pkg/operator).
KARPENTER_FIELD_MANAGER = "karpenter"
# Taints a node autoscaler puts on a node it is about to drain and remove: Karpenter's
# (key karpenter.sh/disruption, value disrupting) and the cluster autoscaler's.
DRAIN_TAINTS = frozenset({"karpenter.sh/disruption", "ToBeDeletedByClusterAutoscaler"})

# The NVIDIA device plugin's resource, and the labels GPU feature discovery writes.
GPU_RESOURCE = "nvidia.com/gpu"
GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_REPLICAS = "nvidia.com/gpu.replicas"
GFD_SHARING = "nvidia.com/gpu.sharing-strategy"

# A Deployment's revision, on it and on each of its ReplicaSets.
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"

# The upstream scheduler's name, and the profile the chart ships for placement.
KUBE_DEFAULT_SCHEDULER = "default-scheduler"
SECONDARY_SCHEDULER = "schedpolicy-scheduler"


def controller_ref(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference marked `controller: true`, if any: at most one per object."""
    return next((o for o in metadata.get("ownerReferences") or () if o.get("controller")), None)
