"""Benchmark suite: a fake upstream, a load generator and a runner that compares proxies.

Run it with ``python -m bench`` (``--help`` lists the flags). Nothing here is imported by
the proxy; the proxy under test is started as a subprocess like any other target.
"""
