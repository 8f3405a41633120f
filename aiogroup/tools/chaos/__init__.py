"""aiogroup's chaos suite: randomised, seeded scenarios on real brokers, judged by an
ownership checker of its own.

``python -m aiogroup.tools.chaos --broker embedded --runs 20`` (see ``docs/chaos.md``). The pieces:
:mod:`~aiogroup.tools.chaos.runner` (plans and runs), :mod:`~aiogroup.tools.chaos.member` (one
member
process of any client), :mod:`~aiogroup.tools.chaos.checker` (the verdict, without Spark),
:mod:`~aiogroup.tools.chaos.brokers` and :mod:`~aiogroup.tools.chaos.proxy` (a TCP proxy that cuts
connections for brokers that cannot).

Names are imported lazily: a member process (``python -m aiogroup.tools.chaos.member``) loads only
what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiogroup.lazy import lazy_attributes

if TYPE_CHECKING:
    from aiogroup.tools.chaos.checker import RunLog, Verdict, Violation, check
    from aiogroup.tools.chaos.proxy import CuttingProxy
    from aiogroup.tools.chaos.runner import ChaosConfig, make_plan, run_once

__all__ = [
    "ChaosConfig",
    "CuttingProxy",
    "RunLog",
    "Verdict",
    "Violation",
    "check",
    "make_plan",
    "run_once",
]

_WHERE = {
    "RunLog": ".checker",
    "Verdict": ".checker",
    "Violation": ".checker",
    "check": ".checker",
    "CuttingProxy": ".proxy",
    "ChaosConfig": ".runner",
    "make_plan": ".runner",
    "run_once": ".runner",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
