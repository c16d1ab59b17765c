"""Benchmarks B1 to B11 (docs/performance.md): ``python -m benchmarks [IDS...]``."""
