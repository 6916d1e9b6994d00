"""schedpolicy: keeps pod-deletion-cost, GPU node labels and placement hints in line
with SchedulingPolicy objects."""

__version__ = "0.1.0"
