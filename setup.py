"""The build of aiogroup's optional C records decoder; everything else is in pyproject.toml.

``aiogroup/consumer/_native_records.c`` decodes the records of v2 batches straight into
``ConsumerRecord`` values (``aiogroup.consumer.records`` uses it when it was built). It is
optional: without a C compiler the installation goes on, and aiokafka's reader decodes the
same records.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "aiogroup.consumer._native_records",
            ["aiogroup/consumer/_native_records.c"],
            optional=True,
        )
    ]
)
