"""The audit bounds how much of one partition's history a window operator holds in memory."""

from __future__ import annotations

from typing import Any

import pytest

from aiogroup.tools.audit.audit import WINDOW_SPILL_KEY, WINDOW_SPILL_ROWS, _bound_window_buffers

pytestmark = pytest.mark.spark


def test_the_bound_replaces_sparks_default_but_not_a_chosen_value(spark: Any) -> None:
    try:
        spark.conf.unset(WINDOW_SPILL_KEY)
        assert spark.conf.get(WINDOW_SPILL_KEY) == str(2**31 - 1)  # Spark: pressure only
        _bound_window_buffers(spark)
        assert spark.conf.get(WINDOW_SPILL_KEY) == str(WINDOW_SPILL_ROWS)
        spark.conf.set(WINDOW_SPILL_KEY, "1000")  # a user's own choice stays
        _bound_window_buffers(spark)
        assert spark.conf.get(WINDOW_SPILL_KEY) == "1000"
    finally:
        spark.conf.unset(WINDOW_SPILL_KEY)
