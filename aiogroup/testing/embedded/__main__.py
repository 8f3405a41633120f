"""``python -m aiogroup.testing.embedded``: the embedded broker as a process.

The command line is :mod:`aiogroup.testing.embedded.cli`'s.
"""

from aiogroup.testing.embedded.cli import main

if __name__ == "__main__":
    main()
