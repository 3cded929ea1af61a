"""Benchmarks behind ``slide bench SUITE``: each prints figures; targets live here, not in
timed tests."""
