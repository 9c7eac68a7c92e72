"""The one interface every tracker of a flavour (sync or asyncio) implements, with
identical signatures (mypy checks it for the class they share), so pipeline code can
take any of them. Written for asyncio; the sync protocol is generated from it by
``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Protocol, runtime_checkable

from ...core.algebra import EdgeLike, Mode
from ...stamps import Position, Stamp, Sum
from ...stats import RequestStats
from ...status import ChainStatus

__all__ = ["AsyncAckTracker"]


@runtime_checkable
class AsyncAckTracker(Protocol):
    """A tracker of ack chains. See :class:`~xor_ack_dynamodb.drivers.AsyncTracker` for
    each method's guarantees and errors."""

    @property
    def mode(self) -> Mode: ...

    @property
    def stats(self) -> RequestStats: ...

    def new_edge(self) -> Stamp | int: ...

    async def create(
        self,
        tag: str,
        value: EdgeLike,
        *,
        op_id: str | None = None,
        owner: str | None = None,
        replace_expired: bool = True,
    ) -> Stamp | Sum: ...

    async def stamp(
        self,
        tag: str,
        value: EdgeLike | None = None,
        *,
        finished: Iterable[EdgeLike] = (),
        started: Iterable[EdgeLike] = (),
        op_id: str | None = None,
        owner: str | None = None,
        after: Position | None = None,
    ) -> Stamp | Sum: ...

    async def fail(self, tag: str, reason: str | None = None, *, owner: str | None = None) -> ChainStatus: ...

    async def touch(
        self, tag: str, ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> ChainStatus: ...

    async def status(self, tag: str) -> ChainStatus: ...

    async def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]: ...

    async def delete(self, tag: str) -> None: ...
