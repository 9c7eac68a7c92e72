"""The methods every asyncio tracker shares: check arguments, build a call, await it.

:class:`~xor_ack_dynamodb.drivers.tracker.SyncTracker` awaited: each method builds its call with
the same :class:`~xor_ack_dynamodb.core.factory.CallFactory` (so bad input gets the same
typed error, before any request) and runs it on an
:class:`~xor_ack_dynamodb.aio.engine.AsyncEngine`. Guarantees, costs and errors are
``SyncTracker``'s, method by method.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from ..core.algebra import EdgeLike, Mode
from ..core.calls import StampCall, first_outcome
from ..core.factory import CallFactory
from ..core.rules import ChainRules
from ..stamps import Stamp, Sum
from ..stats import RequestStats
from ..status import ChainStatus
from .engine import AsyncEngine

__all__ = ["AsyncTracker"]


class AsyncTracker:
    """Chains on ``engine``'s store, under ``engine``'s rules. Any number of tasks of one
    event loop may share a tracker."""

    engine: AsyncEngine
    calls: CallFactory

    def _bind(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.calls = CallFactory(engine.rules)

    @property
    def rules(self) -> ChainRules:
        return self.engine.rules

    @property
    def stats(self) -> RequestStats:
        """Requests made (what DynamoDB bills) and events, as ``SyncTracker.stats``."""
        return self.engine.stats

    @property
    def mode(self) -> Mode:
        """``"xor"`` or ``"sum"``."""
        return self.engine.rules.mode

    def new_edge(self) -> Stamp | int:
        """A random edge for this tracker's mode (no I/O, so not awaited)."""
        return self.engine.rules.algebra.new_edge()

    async def create(
        self, tag: str, value: EdgeLike, *, op_id: str | None = None, owner: str | None = None
    ) -> Stamp | Sum:
        """Start a chain; see :meth:`SyncTracker.create`."""
        return await self.engine.run(self.calls.create(tag, value, op_id, owner))

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
        """Apply one stamp; see :meth:`SyncTracker.stamp`. ``acked`` is True for exactly
        one call, across tasks, threads and processes. A task cancelled mid-stamp applied
        it once or not at all: stamp again with the same ``op_id`` to tell (``duplicate``
        True: it had landed)."""
        call = self.calls.stamp(tag, value, finished, started, op_id, owner, self.engine.cache.get(tag))
        if isinstance(call, StampCall):
            return first_outcome(await self.engine.run(call))
        return await self.engine.run(call)

    async def fail(self, tag: str, reason: str | None = None, *, owner: str | None = None) -> ChainStatus:
        """Mark a chain failed; see :meth:`SyncTracker.fail`."""
        status, _ = await self.engine.run(self.calls.fail(tag, reason, owner))
        return status

    async def touch(
        self, tag: str, ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> ChainStatus:
        """Push a pending chain's deadline; see :meth:`SyncTracker.touch`."""
        return await self.engine.run(self.calls.touch(tag, ttl, owner))

    async def status(self, tag: str) -> ChainStatus:
        """The chain as it is now; see :meth:`SyncTracker.status`."""
        return await self.engine.run(self.calls.status(tag))

    async def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """Many chains' statuses; see :meth:`SyncTracker.status_many`."""
        return await self.engine.status_many(self.calls.tags(tags))

    async def delete(self, tag: str) -> None:
        """Delete a chain; see :meth:`SyncTracker.delete`."""
        await self.engine.run(self.calls.delete(tag))
