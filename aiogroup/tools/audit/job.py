"""spark-submit entry point: ``spark-submit aiogroup/tools/audit/job.py EVENTS... --out DIR``.

The same job as ``python -m aiogroup analyze``; the master and every cluster setting come from
spark-submit (the session is only created in local mode with laptop-friendly defaults).
"""

from __future__ import annotations

import sys

from aiogroup.tools.audit.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
