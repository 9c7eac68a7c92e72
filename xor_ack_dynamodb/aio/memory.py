"""AsyncMemoryAck: :class:`~xor_ack_dynamodb.MemoryAck` for asyncio code and its tests.

An in-memory store never waits on I/O, so each method simply runs ``MemoryAck``'s (the
same calls, rules, callbacks and rotation) and returns; it never blocks the loop for
longer than a dict update. Swap it for
:class:`~xor_ack_dynamodb.aio.AsyncXorAckDynamoDB` with no other change to the code
under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import timedelta

from ..core.algebra import EdgeLike, Mode
from ..core.factory import CallFactory
from ..core.rules import ChainRules
from ..drivers.engine import Engine
from ..stamps import Stamp, Sum
from ..stats import RequestStats
from ..status import ChainStatus
from ..stores.memory import AckedCallback, FailedCallback, MemoryAck, MemoryStore

__all__ = ["AsyncMemoryAck"]


class AsyncMemoryAck:
    """Ack chains in memory, awaited. The parameters are
    :class:`~xor_ack_dynamodb.MemoryAck`'s; ``share`` takes another ``AsyncMemoryAck``
    (or a ``MemoryAck``), whose chains this one then works on. ``memory`` is the
    ``MemoryAck`` underneath, for sync code in the same test."""

    def __init__(
        self,
        *,
        mode: Mode = "xor",
        buckets: int = 3,
        on_acked: AckedCallback | None = None,
        on_failed: FailedCallback | None = None,
        max_ops: int = 32,
        ttl: timedelta | float | None = None,
        retention: timedelta | float = timedelta(days=1),
        skew: timedelta | float = 5,
        edge_size: int = 16,
        delete_on_ack: bool = False,
        clock: Callable[[], float] = time.time,
        share: AsyncMemoryAck | MemoryAck | None = None,
    ) -> None:
        shared: MemoryAck | None = share.memory if isinstance(share, AsyncMemoryAck) else share
        self.memory: MemoryAck = MemoryAck(
            mode=mode,
            buckets=buckets,
            on_acked=on_acked,
            on_failed=on_failed,
            max_ops=max_ops,
            ttl=ttl,
            retention=retention,
            skew=skew,
            edge_size=edge_size,
            delete_on_ack=delete_on_ack,
            clock=clock,
            share=shared,
        )

    def __len__(self) -> int:
        return len(self.memory)

    @property
    def engine(self) -> Engine:
        return self.memory.engine

    @property
    def calls(self) -> CallFactory:
        return self.memory.calls

    @property
    def store(self) -> MemoryStore:
        return self.memory.store

    @property
    def rules(self) -> ChainRules:
        return self.memory.rules

    @property
    def stats(self) -> RequestStats:
        return self.memory.stats

    @property
    def mode(self) -> Mode:
        return self.memory.mode

    @property
    def max_ops(self) -> int:
        return self.memory.max_ops

    def new_edge(self) -> Stamp | int:
        return self.memory.new_edge()

    async def create(
        self, tag: str, value: EdgeLike, *, op_id: str | None = None, owner: str | None = None
    ) -> Stamp | Sum:
        """See :meth:`MemoryAck.create`."""
        return self.memory.create(tag, value, op_id=op_id, owner=owner)

    async def stamp(
        self,
        tag: str,
        value: EdgeLike | None = None,
        *,
        finished: Iterable[EdgeLike] = (),
        started: Iterable[EdgeLike] = (),
        op_id: str | None = None,
        owner: str | None = None,
    ) -> Stamp | Sum:
        """See :meth:`MemoryAck.stamp` (``on_acked`` is called as there)."""
        return self.memory.stamp(tag, value, finished=finished, started=started, op_id=op_id, owner=owner)

    async def fail(self, tag: str, reason: str | None = None, *, owner: str | None = None) -> ChainStatus:
        """See :meth:`MemoryAck.fail` (``on_failed`` is called as there)."""
        return self.memory.fail(tag, reason, owner=owner)

    async def touch(
        self, tag: str, ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> ChainStatus:
        return self.memory.touch(tag, ttl, owner=owner)

    async def status(self, tag: str) -> ChainStatus:
        return self.memory.status(tag)

    async def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        return self.memory.status_many(tags)

    async def delete(self, tag: str) -> None:
        self.memory.delete(tag)

    def rotate(self) -> list[str]:
        """See :meth:`MemoryAck.rotate` (synchronous: it never waits)."""
        return self.memory.rotate()
