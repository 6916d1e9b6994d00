"""The operator's picture of the cluster: wire types, records, the indexed view, and the
inputs it assembles for the core's decisions. It may import core/ and msgspec, never
shell/ or app/, and it does no I/O.
"""
