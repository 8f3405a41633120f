"""The records of a v2 record batch decoded in C (``_native_records.c``; optional)."""

from typing import Any

class RecordReader:
    """The records of one v2 batch's (uncompressed) records section, as values of ``cls``."""

    def __new__(
        cls,
        record_cls: type[tuple[Any, ...]],
        topic: str,
        partition: int,
        ts_type: int,
        data: bytes | bytearray | memoryview,
        base_offset: int,
        first_timestamp: int,
        max_timestamp: int,
        count: int,
        /,
    ) -> RecordReader: ...
    def __iter__(self) -> RecordReader: ...
    def __next__(self) -> Any: ...
    def take(self, out: list[Any], count: int, /) -> bool:
        """Append up to ``count`` records to ``out``; True once the batch has no record left."""
