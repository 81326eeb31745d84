"""Benchmarks: `make bench`."""
