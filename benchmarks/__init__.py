"""Benchmarks B1 to B11 (each described in docs/performance.md): ``python -m benchmarks [IDS...]``."""
