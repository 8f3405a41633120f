"""Audit of rebalance telemetry on Spark: ownership overlaps, unowned time, moves, latency.

Entry points: :func:`aiogroup.analytics.cli.main` (``python -m aiogroup analyze``) and
``aiogroup/analytics/job.py`` for spark-submit. PySpark is imported only by the submodules that
need it (the ``analytics`` extra).
"""
