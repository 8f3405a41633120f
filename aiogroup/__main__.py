"""``python -m aiogroup``: the ``aiogroup`` command (:mod:`aiogroup.tools.cli`)."""

from __future__ import annotations

import sys

from aiogroup.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
