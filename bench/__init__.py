"""Benchmark harnesses: each module measures cone against a named baseline in the same run."""
