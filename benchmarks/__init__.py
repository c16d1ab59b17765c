"""Benchmarks of ../shared/BENCHMARKS.md: ``python -m benchmarks [IDS...]``."""
