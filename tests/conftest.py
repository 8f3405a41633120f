"""Project-wide test settings.

Hypothesis runs without per-example deadlines: these machines are shared and noisy, and speed is
measured by the benchmarks in bench/, never by tests.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "aiogroup",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
# CI gates a landing, so it explores the same examples on every run (each test's seed is derived
# from its source): a failure there is reproducible, never a lucky draw. Local runs stay random
# and keep exploring.
settings.register_profile(
    "ci",
    parent=settings.get_profile("aiogroup"),
    derandomize=True,
)
settings.load_profile("ci" if os.environ.get("CI") else "aiogroup")
