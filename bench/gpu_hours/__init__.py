"""B6: GPU node-hours on a window of the Alibaba GPU trace, under a real Karpenter."""
