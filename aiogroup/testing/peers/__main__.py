"""Run a peer by hand: ``python -m aiogroup.testing.peers KIND [peer options]``.

KIND is ``java`` or ``franz-go``; the peer is built first if needed (docs/peers.md). The
options are the peer's own (``--bootstrap H:P --group G --topic T --name N`` and the rest);
``--print-command`` prints the command line instead of running it, ``--build`` only builds.
"""

from __future__ import annotations

import os
import shlex
import sys

from aiogroup.testing.peers import KINDS, PeerUnavailableError, program


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in KINDS:
        print(f"usage: python -m aiogroup.testing.peers {{{','.join(KINDS)}}} "
              "[--print-command | --build] --bootstrap H:P --group G --topic T --name N ...",
              file=sys.stderr)  # fmt: skip
        return 2
    kind, rest = args[0], args[1:]
    try:
        command = program(kind)
    except PeerUnavailableError as exc:
        print(f"{kind} peer: {exc}", file=sys.stderr)
        return 1
    if "--build" in rest:
        print(shlex.join(command))
        return 0
    if "--print-command" in rest:
        rest.remove("--print-command")
        print(shlex.join(command + rest))
        return 0
    os.execv(command[0], command + rest)


if __name__ == "__main__":
    sys.exit(main())
