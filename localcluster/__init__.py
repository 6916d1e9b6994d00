"""A real local Kubernetes control plane for tests and the demo (not part of the product)."""

from localcluster.controlplane import DEFAULT_WORKDIR, ClusterError, LocalCluster

__all__ = ["DEFAULT_WORKDIR", "ClusterError", "LocalCluster"]
