"""Benchmarks: run with `make bench`; figures go to docs/benchmarks.md."""
