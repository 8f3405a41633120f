"""Runnable examples of aiogroup (each module is also a script: ``python examples/NAME.py``)."""
