"""Benchmarks against the real local control plane. Each reports a ratio against a baseline
measured in the same run, because absolute numbers on a shared 2-core machine are noise."""
