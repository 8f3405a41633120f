"""The ``aiogroup`` command (also ``python -m aiogroup``): the demo, the telemetry audit and the
group inspector."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

USAGE = """usage: {prog} COMMAND [ARGS...]

commands:
  demo       start a broker and watch a cooperative group rebalance while records flow
  analyze    audit rebalance telemetry on Spark ({prog} analyze --help)
  group      describe or watch a consumer group ({prog} group --help)

options:
  -h, --help     this message
  -V, --version  aiogroup's version
"""


def program_name(argv0: str | None = None) -> str:
    """How the user started us: ``aiogroup`` (the installed script) or ``python -m aiogroup``."""
    name = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    return "aiogroup" if name in ("aiogroup", "aiogroup.exe") else "python -m aiogroup"


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    prog = prog or program_name()
    if not args or args[0] in ("-h", "--help"):
        print(USAGE.format(prog=prog), end="")
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from aiogroup import __version__

        print(f"aiogroup {__version__}")
        return 0
    command, rest = args[0], args[1:]
    if command == "demo":
        from aiogroup.tools.demo import main as demo_main

        return demo_main(rest, prog=f"{prog} demo")
    if command == "analyze":
        from aiogroup.tools.audit.cli import main as analyze_main

        return analyze_main(rest, prog=f"{prog} analyze")
    if command == "group":
        from aiogroup.tools.group import main as group_main

        return group_main(rest, prog=f"{prog} group")
    print(f"unknown command {command!r}\n\n{USAGE.format(prog=prog)}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
