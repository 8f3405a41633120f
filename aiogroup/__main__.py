"""``python -m aiogroup``: the demo, the telemetry audit and the group inspector."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: python -m aiogroup COMMAND [ARGS...]

commands:
  demo       start the Tansu broker and watch a cooperative group rebalance
  analyze    audit rebalance telemetry on Spark (python -m aiogroup analyze --help)
  group      describe or watch a consumer group (python -m aiogroup group --help)
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "demo":
        from aiogroup.demo import main as demo_main

        return demo_main(rest)
    if command == "analyze":
        from aiogroup.analytics.cli import main as analyze_main

        return analyze_main(rest)
    if command == "group":
        from aiogroup.group_cli import main as group_main

        return group_main(rest)
    print(f"unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
