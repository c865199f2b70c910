"""Herald's benchmark harness (``make bench``; see bench/README.md and docs/performance.md).

Nothing here is imported by Herald itself or by the test suite.
"""
