"""Audit of rebalance telemetry on Spark: ownership overlaps, unowned time, moves, latency.

Entry points: :func:`aiogroup.tools.audit.cli.main` (``python -m aiogroup analyze``) and
``aiogroup/tools/audit/job.py`` for spark-submit. PySpark is imported only by the submodules that
need it (the ``analytics`` extra).
"""
