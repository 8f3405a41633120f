"""The driver's side of offset commits: the answers the application waits for, and the
committed offsets it asks for.

:class:`PendingCommits` holds one future per commit the membership machine accepted (by its
token) until the machine resolves it. A revocation waits for the commits already in flight
before it is reported done (:meth:`PendingCommits.settle`): a commit the application started
while it owned a partition reaches the coordinator before the group learns the partition was
given up, so a new owner never starts from offsets a commit still in flight would overwrite
(KIP-429 and KIP-848 both hand a partition over only once its revocation is acknowledged).

:func:`fetch_committed` is OffsetFetch with the retries of Java's ``committed()``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

from aiogroup.client.transport import CommittedOffset, OffsetFetchResult, Transport
from aiogroup.errors import (
    AiogroupError,
    CoordinatorUnreachableError,
    RetriableError,
    error_for_code,
)
from aiogroup.protocol.types import TopicPartition

__all__ = ["PendingCommits", "fetch_committed"]

log = logging.getLogger("aiogroup.client")


class PendingCommits:
    """The futures of the commits in flight, by the machine's token."""

    def __init__(self) -> None:
        self._futures: dict[int, asyncio.Future[None]] = {}

    def open(self, token: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures[token] = future
        return future

    def resolve(self, token: int, error: BaseException | None) -> None:
        future = self._futures.pop(token, None)
        if future is not None and not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

    def fail_all(self, error: AiogroupError) -> None:
        for future in self._futures.values():
            if not future.done():
                future.set_exception(error)
        self._futures.clear()

    async def settle(self, timeout: float) -> None:
        """Wait (up to ``timeout``) until every commit in flight now is answered; their
        outcomes go to whoever waits for them."""
        pending = {f for f in self._futures.values() if not f.done()}
        if pending:
            await asyncio.wait(pending, timeout=timeout)


async def fetch_committed(
    transport: Transport,
    partitions: Iterable[TopicPartition],
    *,
    member: Callable[[], tuple[str, int] | None],
    run: Callable[[Coroutine[Any, Any, OffsetFetchResult]], Awaitable[OffsetFetchResult]],
    still_running: Callable[[], None],
    bound_s: float,
    backoff_s: float,
    group_id: str,
) -> dict[TopicPartition, int | None]:
    """The committed offsets of ``partitions`` (None where nothing is committed), asking as
    ``member()`` (KIP-848: who asks, at its epoch; None under the classic protocol).

    Retriable answers (the coordinator loading its offsets after a restart, moving, or out of
    reach) are retried with backoff within ``bound_s``, as Java's ``committed()`` does within
    ``default.api.timeout.ms``; other errors raise."""
    wanted = list(partitions)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    backoff = max(backoff_s, 0.01)
    while True:
        try:
            identity = member()
            fetch = (
                transport.offset_fetch(wanted)
                if identity is None
                else transport.offset_fetch(wanted, member=identity)
            )
            result = await asyncio.wait_for(run(fetch), max(deadline - loop.time(), 0.0))
            error: AiogroupError | None = None
            if result.error_code:
                error = error_for_code(result.error_code, "OffsetFetch failed")
        except RetriableError as exc:  # CoordinatorUnreachableError among them
            error = exc
        except TimeoutError:
            raise CoordinatorUnreachableError(
                f"OffsetFetch: no answer within {bound_s:.0f} s"
            ) from None
        if error is None:
            return {tp: _offset_or_none(c) for tp, c in result.offsets.items()}
        if not isinstance(error, RetriableError) or loop.time() + backoff >= deadline:
            raise error
        log.debug("group %s: OffsetFetch: %s; retrying", group_id, error)
        await asyncio.sleep(backoff)  # retry backoff
        backoff = min(backoff * 2, 1.0)
        still_running()


def _offset_or_none(committed: CommittedOffset) -> int | None:
    return None if committed.offset < 0 else committed.offset
