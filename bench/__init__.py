"""Benchmarks of taichi_hydro across backends and against Drake (see bench/README.md)."""
