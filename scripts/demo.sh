#!/usr/bin/env bash
# The demo, so far: the local cluster's fake nodes with their zone, capacity type,
# instance type and GPUs. `make demo` has already started the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBECONFIG=$PWD/.cluster/local/kubeconfig
kubectl=.tools/bin/kubectl
[[ -n "${SCHEDPOLICY_TOOLS_BIN:-}" ]] && kubectl=$SCHEDPOLICY_TOOLS_BIN/kubectl

echo
echo "== Nodes of the local cluster (real kube-apiserver $($kubectl version -o json | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1), nodes faked by KWOK)"
$kubectl get nodes -o custom-columns='NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,ZONE:.metadata.labels.topology\.kubernetes\.io/zone,INSTANCE-TYPE:.metadata.labels.node\.kubernetes\.io/instance-type,CAPACITY(KARPENTER):.metadata.labels.karpenter\.sh/capacity-type,CAPACITY(EKS):.metadata.labels.eks\.amazonaws\.com/capacityType,GPUS:.status.allocatable.nvidia\.com/gpu,GFD-PRODUCT:.metadata.labels.nvidia\.com/gpu\.product'
echo
echo "The cluster keeps running. Explore it with:"
echo "  export KUBECONFIG=$KUBECONFIG"
echo "  $kubectl get nodes,pods -A"
echo "Stop it with: make cluster-down"
