"""B5 and B5g: what a scale-down leaves behind, decided by the real ReplicaSet controller,
without a policy and with one (deployment.py: each way a lane of bench.lanes)."""
