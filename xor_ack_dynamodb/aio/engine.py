"""The asyncio driver: :class:`~xor_ack_dynamodb.drivers.engine.Engine` with ``await``.

It runs the very same sans-IO calls (:mod:`xor_ack_dynamodb.core.calls`), stepping their
rounds with the same :class:`~xor_ack_dynamodb.drivers.engine.Step` and sharing everything
but the I/O with the sync engine (:class:`~xor_ack_dynamodb.drivers.engine.EngineBase`):
the retry budget (tenacity's ``AsyncRetrying``: the waits are ``asyncio.sleep``, so a
backoff never blocks the loop), the cache of last known chains, the stats, and the
errors raised when a budget is spent.

Cancellation: a task cancelled while it awaits the store stops there. A request already
sent may or may not be applied by the table (exactly as when a response is lost), never
applied twice, since every write is conditional and carries its op id: call again with
the same ``op_id`` to find out (a ``duplicate`` result means the cancelled call's write
landed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

import tenacity

from ..core.calls import Again, Call, Transient
from ..core.chain import Chain
from ..core.messages import Reply, Request
from ..drivers.engine import BatchRead, EngineBase, Unprocessed
from ..status import ChainStatus

__all__ = ["AsyncChainStore", "AsyncEngine"]

T = TypeVar("T")


class AsyncChainStore(Protocol):
    """:class:`~xor_ack_dynamodb.drivers.engine.ChainStore`, awaited: the same primitives,
    the same answers."""

    async def execute(self, request: Request) -> Reply | Chain | None: ...

    def is_transient(self, error: BaseException) -> bool: ...

    async def read_many(self, tags: list[str]) -> BatchRead: ...


class AsyncEngine(EngineBase[AsyncChainStore]):
    """Runs calls on an :class:`AsyncChainStore` for one tracker, in one event loop. Any
    number of tasks may run calls at once."""

    async def run(self, call: Call[T]) -> T:
        """Run ``call`` to its result; raises as ``Engine.run`` does."""
        retrying = self.retry.async_retrying(tenacity.retry_if_exception_type((Again, Transient)))
        retrying.before_sleep = self.before_retry
        try:
            result: T = await retrying(self._round, call)
            return result
        except tenacity.RetryError as exc:
            raise self.spent(exc, call) from None
        finally:
            self.remember(call)

    async def _round(self, call: Call[T]) -> T:
        step = self.step(call, self.store.is_transient)
        while not step.done:
            try:
                reply = await self.store.execute(step.request)
            except Exception as exc:
                step.failed(exc)
            else:
                step.reply(reply)
        return step.result

    async def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """``Engine.status_many``, awaited (the batches are read one after another)."""
        wanted, batches = self.batches(tags)
        found: dict[str, ChainStatus] = {}
        for batch in batches:
            found.update(await self._read_batch(batch))
        return {t: found[t] for t in wanted if t in found}

    async def _read_batch(self, tags: list[str]) -> dict[str, ChainStatus]:
        found: dict[str, ChainStatus] = {}
        pending = tags
        retrying = self.retry.async_retrying(tenacity.retry_if_exception_type((Unprocessed, Transient)))
        retrying.before_sleep = self.before_retry

        async def attempt() -> None:
            nonlocal pending
            try:
                batch = await self.store.read_many(pending)
            except Exception as exc:
                if self.store.is_transient(exc):
                    raise Transient(exc) from exc
                raise
            pending = self.absorb(batch, found)
            if pending:
                raise Unprocessed

        try:
            await retrying(attempt)
        except tenacity.RetryError as exc:
            raise self.batch_spent(exc, pending) from None
        return found
