"""statekit benchmarks: each figure is a ratio against a baseline measured in the same run.

Run all with ``python -m bench``; one with ``python -m bench.snapshot`` or
``python -m bench.throughput``. Figures go to ``bench/results/<name>.json``.
"""
