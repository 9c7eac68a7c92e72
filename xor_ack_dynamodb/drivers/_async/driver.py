"""The driver: runs the sans-IO calls of :mod:`xor_ack_dynamodb.core.calls` on a store.

The store implements the primitives (:class:`AsyncChainStore`); the calls hold the
rules; the driver moves requests and replies between them, waits between attempts as
the :class:`~xor_ack_dynamodb.RetryPolicy` says (tenacity: every wait of every loop
here goes through it), and keeps the last known value of recently used chains.

The asyncio driver is written by hand; the sync one is generated from it by
``scripts/unasync.py``. A call interrupted while it waits on the store (a cancelled
task, an interrupted thread) stops there: a request already sent may or may not be
applied by the table, exactly as when a response is lost, and never twice, since every
write is conditional and carries its op id; calling again with the same ``op_id``
tells (a ``duplicate`` result means the interrupted call's write landed).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import tenacity

from ...core.batch import (
    BATCH_SIZE,
    TRANSACTION_SIZE,
    Answer,
    EndpointWatch,
    Lockstep,
    StatusResult,
    chunks,
    statuses,
)
from ...core.calls import Again, Call, Step, Transient
from ...core.chain import Chain, Op
from ...core.messages import (
    DATED,
    BatchRead,
    Cancelled,
    Committed,
    HistoryRead,
    Rejected,
    Reply,
    Request,
    TransactionsUnsupported,
    dated,
)
from ...core.rules import ChainRules
from ...errors import BatchIncomplete
from ...retry import RetryPolicy
from ...stats import RequestStats
from ...status import ChainStatus
from ..cache import HISTORY_BLOCKS, LastKnown
from ..fanout import AsyncFanOut, Progress, check_concurrency

__all__ = ["AsyncChainStore", "AsyncDriver"]

log = logging.getLogger("xor_ack_dynamodb")

T = TypeVar("T")


class AsyncChainStore(Protocol):
    """The primitives a store implements: one atomic request at a time, batch reads and
    transactions.

    ``execute`` answers a :class:`~xor_ack_dynamodb.core.messages.Read` with a chain or
    None, a ``ReadHistory`` with a ``HistoryRead`` and every other request with a
    ``Written`` or ``Rejected``; it raises on failure. ``is_transient`` tells failures
    after which the request may or may not have been applied and that are worth
    another attempt. ``transact`` applies requests on distinct chains all or none, or
    raises ``TransactionsUnsupported`` where the backend has no transactions.
    """

    async def execute(self, request: Request) -> Reply | Chain | HistoryRead | None: ...

    def is_transient(self, error: BaseException) -> bool: ...

    async def read_many(self, tags: list[str]) -> BatchRead: ...

    async def transact(self, requests: list[Request]) -> Committed | Cancelled: ...


class _Dated:
    """The store as the driver's loops use it: a request whose condition tests a chain's
    deadline (:data:`~xor_ack_dynamodb.core.messages.DATED`) is dated with the clock
    read just before it is handed to the store (``dated``), each entry of a transaction
    alike, and its rejection carries that reading (``Rejected.at``), so the call judges
    it at the time its test was made. A round may wait seconds on reads (a read timeout
    and its resend) before its write: the write is tested against the clock as it goes
    out, never as the round began. Every other attribute is the store's (its
    ``client``)."""

    def __init__(self, store: AsyncChainStore, now: Callable[[], int]) -> None:
        self.store = store
        self.now = now

    def __getattr__(self, name: str) -> Any:
        if name == "store":  # not set yet (a copy being made): never recurse
            raise AttributeError(name)
        return getattr(self.store, name)

    def is_transient(self, error: BaseException) -> bool:
        return self.store.is_transient(error)

    async def execute(self, request: Request) -> Reply | Chain | HistoryRead | None:
        if not isinstance(request, DATED):
            return await self.store.execute(request)
        now = self.now()
        reply = await self.store.execute(dated(request, now))
        return _tested_at(reply, now) if isinstance(reply, Rejected) else reply

    async def read_many(self, tags: list[str]) -> BatchRead:
        return await self.store.read_many(tags)

    async def transact(self, requests: list[Request]) -> Committed | Cancelled:
        now = self.now()
        answer = await self.store.transact([dated(r, now) for r in requests])
        if isinstance(answer, Cancelled):
            return Cancelled({i: _tested_at(r, now) for i, r in answer.rejected.items()})
        return answer


def _tested_at(reply: Rejected, now: int) -> Rejected:
    """``reply``, carrying the clock reading its request was tested with."""
    if reply.at is None or reply.at < now:
        return Rejected(reply.current, reply.resent, now)
    return reply


class _Unprocessed(Exception):
    """A batch read left keys unprocessed: back off and ask for them again."""


class _Unfinished(Exception):
    """Calls of a batch are still waiting or must run another round: back off."""


class AsyncDriver:
    """Runs calls on ``store`` for one tracker, under ``rules``, within ``retry``'s
    budget; ``clock`` gives "now" (epoch seconds) to each round, and dates each write
    that tests a chain's deadline just before it is sent (:class:`_Dated`: a chain's
    deadline is never tested against a reading older than the request's own send, so a
    slow round cannot land a write after the deadline); ``cache_size`` chains' last
    known values are kept (0: none), and up to :data:`HISTORY_BLOCKS` history blocks
    (never stale: a block never changes once written), so the stamps of one chain's
    siblings read each block once. Any number of threads (sync) or tasks of one event
    loop (asyncio) may run calls at once."""

    def __init__(
        self,
        store: AsyncChainStore,
        rules: ChainRules,
        *,
        retry: RetryPolicy | None = None,
        stats: RequestStats | None = None,
        clock: Callable[[], float] = time.time,
        cache_size: int = 10_000,
    ) -> None:
        self.clock = clock
        self.store = _Dated(store, self.now)
        self.rules = rules
        self.retry = retry or RetryPolicy()
        self.stats = stats or RequestStats()
        self.cache: LastKnown[Chain] = LastKnown(cache_size)
        self.history: LastKnown[tuple[Op, ...]] = LastKnown(HISTORY_BLOCKS)

    def now(self) -> int:
        """The clock, in whole epoch seconds."""
        return int(self.clock())

    # -- one call ------------------------------------------------------------------------

    async def run(self, call: Call[T]) -> T:
        """Run ``call`` to its result. Raises the call's error; ``StaleLocalData`` when
        the budget is spent on lost races; the store's own exception when transient
        failures outlast it."""
        retrying = self._retrying(Again, Transient)
        try:
            result: T = await retrying(self._round, call)
            return result
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
            if isinstance(last, Transient):
                raise last.error from last.error.__cause__  # keep botocore's original
            raise call.exhausted(exc.last_attempt.attempt_number) from None
        finally:
            self._remember(call)

    async def _round(self, call: Call[T]) -> T:
        step = Step(call.round(self.now()), self.store.is_transient)
        while not step.done:
            try:
                reply = await self.store.execute(step.request)
            except Exception as exc:
                step.failed(exc)
            else:
                step.reply(reply)
        return step.result

    # -- reads in bulk -------------------------------------------------------------------

    async def status_many(
        self, tags: Iterable[str], *, concurrency: int | None = None, progress: Progress | None = None
    ) -> StatusResult:
        """Statuses of ``tags`` (already checked), :data:`BATCH_SIZE` per read (see
        :meth:`read`, each with its own retry budget), ``concurrency`` reads at once
        (:meth:`concurrency`), ``progress(done, total)`` after each. Tags with no chain
        are in ``missing``; an item that cannot be decoded is reported ``corrupt``
        instead of failing the call. A read that fails raises (the reads not started are
        not sent): a result never leaves out a tag it could not read."""
        wanted = list(dict.fromkeys(tags))  # in order, each once
        found: dict[str, ChainStatus] = {}

        async def read(chunk: list[str]) -> int:
            now = self.now()  # as the read goes out: a late answer is judged at its asking
            found.update(statuses(await self.read(chunk), self.rules, now))
            return len(chunk)

        jobs = [functools.partial(read, chunk) for chunk in chunks(wanted, BATCH_SIZE)]
        await AsyncFanOut(await self.concurrency(concurrency)).run(jobs, len(wanted), progress)
        missing = [t for t in wanted if t not in found]
        return StatusResult(((t, found[t]) for t in wanted if t in found), missing)

    async def read(self, tags: list[str]) -> BatchRead:
        """Read ``tags`` (at most :data:`BATCH_SIZE`) strongly consistently, keys the
        store left unprocessed asked again after a backoff. Raises
        :class:`BatchIncomplete` when keys are still unprocessed at the end of the
        budget, the store's exception when transient failures outlast it."""
        found = BatchRead()
        pending = tags

        async def attempt() -> None:
            nonlocal pending
            try:
                batch = await self.store.read_many(pending)
            except Exception as exc:
                if self.store.is_transient(exc):
                    raise Transient(exc) from exc
                raise
            found.chains += batch.chains
            found.corrupt.update(batch.corrupt)
            pending = batch.unprocessed
            if pending:
                raise _Unprocessed

        try:
            await self._retrying(_Unprocessed, Transient)(attempt)
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
            if isinstance(last, Transient):
                raise last.error from last.error.__cause__  # keep botocore's original
            raise BatchIncomplete(f"{len(pending)} keys still unprocessed after the retry budget") from None
        return found

    # -- many calls together -------------------------------------------------------------

    async def run_many(
        self,
        calls: Sequence[Call[T]],
        *,
        concurrency: int | None = None,
        progress: Progress | None = None,
        transactions: bool = True,
    ) -> list[T | Exception]:
        """Run ``calls`` (on distinct chains) to their results together: in groups of
        :data:`TRANSACTION_SIZE`, each in lockstep (:mod:`xor_ack_dynamodb.core.batch`):
        its reads in bulk, its writes in one transaction. Each group has the driver's
        whole retry budget, so a batch of any size ends within about ``groups /
        concurrency`` budgets; ``concurrency`` groups run at once (:meth:`concurrency`),
        ``progress(done, total)`` is called with the calls settled after each. Returns
        each call's result or the error it ended with, in order: a typed error of the
        rules, the store's exception when transient failures outlast the group's budget,
        or ``StaleLocalData`` when it is spent on lost races. ``transactions=False``:
        each write of a group goes alone, as where the store has no transactions.

        A dead endpoint ends the batch promptly (:class:`~xor_ack_dynamodb.core.batch.EndpointWatch`):
        once :data:`~xor_ack_dynamodb.core.batch.UNREACHABLE_GROUPS` groups in a row
        have ended with every call ``EndpointUnreachable`` (or ``ConnectTimeout``), the
        groups not started are not sent and each of their calls gets an error of that
        type (nothing of it was applied); a throttle, a read timeout or any answer breaks
        the run."""
        tags = [c.tag for c in calls]
        if len(set(tags)) != len(tags):
            raise ValueError("run_many() takes calls on distinct chains")
        outcomes: list[T | Exception] = []
        groups = chunks(calls, TRANSACTION_SIZE)
        settled: list[list[T | Exception]] = [[] for _ in groups]
        watch = EndpointWatch()
        unsent = 0

        async def run_group(n: int) -> int:
            nonlocal unsent
            dead = watch.dead()
            if dead is None:
                settled[n] = await self._run_group(groups[n], transactions)
                watch.record(settled[n])
                return len(groups[n])
            if not unsent:
                log.warning(
                    "%d groups in a row found the endpoint unreachable: not sending the rest (%s)",
                    watch.limit,
                    dead,
                )
            settled[n] = [*watch.unsent([c.tag for c in groups[n]], dead)]
            unsent += len(groups[n])
            self.stats.add("unsent", len(groups[n]))
            return len(groups[n])

        jobs = [functools.partial(run_group, n) for n in range(len(groups))]
        await AsyncFanOut(await self.concurrency(concurrency)).run(jobs, len(calls), progress)
        for group in settled:
            outcomes += group
        return outcomes

    async def _run_group(self, calls: Sequence[Call[T]], transactions: bool) -> list[T | Exception]:
        """One group of :meth:`run_many`, within one retry budget."""
        batch = Lockstep(calls, self.store.is_transient, transactions)
        retrying = self._retrying(_Unfinished)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if batch.again:  # calls about to run another round (not those still waiting)
                self.stats.add("retries", len(batch.again))

        retrying.before_sleep = before_sleep
        try:
            await retrying(self._attempt_many, batch)
        except tenacity.RetryError as exc:
            batch.give_up(exc.last_attempt.attempt_number)
        finally:
            for call in calls:
                self._remember(call)
        return batch.outcomes()

    async def concurrency(self, asked: int | None = None) -> int:
        """How many groups of a batch run at once: ``asked`` (an int of at least 1, else
        :class:`InvalidConfig`; default 1), at most the store's client's connection pool
        (botocore's ``max_pool_connections``, 10 unless the client was built with
        another: more threads than connections would open connections the pool then
        discards). One by default: moto in process is not thread-safe (its
        transactions copy and restore whole tables), and a server that answers one
        request at a time (the embedded moto server) only queues the others, towards
        their read timeout. DynamoDB and DynamoDB Local gain from more
        (docs/performance.md, "Batch calls at scale")."""
        if asked is None:
            return 1
        limit = check_concurrency(asked)
        client = getattr(self.store, "client", None)
        if callable(client):
            config = getattr(getattr(await client(), "meta", None), "config", None)
            pool = getattr(config, "max_pool_connections", None)
            if isinstance(pool, int) and pool >= 1:
                limit = min(limit, pool)
        return limit

    async def _attempt_many(self, batch: Lockstep[Any]) -> None:
        """New rounds for the calls that need one, then passes while any request is
        answered. Raises :class:`_Unfinished` to back off when calls remain."""
        batch.start(self.now())
        while batch.steps and await self._pass(batch):
            pass
        if batch.unfinished:
            raise _Unfinished

    async def _pass(self, batch: Lockstep[Any]) -> bool:
        """Send what the waiting steps ask for: reads in bulk, writes in transactions (one
        by one where the store has none), the rest singly; hand the answers over.
        Returns whether any request was answered."""
        answers: dict[int, Answer] = {}
        reads, writes, singles = batch.sort()
        for chunk in chunks(reads, BATCH_SIZE):
            try:
                found = await self.store.read_many([batch.tag(i) for i in chunk])
            except Exception as exc:
                answers.update((i, (None, exc)) for i in chunk)
            else:
                answers.update(batch.read(chunk, found))
        if writes:
            try:
                await self._transact(batch, writes, answers)
            except TransactionsUnsupported:
                batch.transactions = False
                singles += [i for i in writes if i not in answers]
        for i in singles:
            try:
                answers[i] = (await self.store.execute(batch.steps[i].request), None)
            except Exception as exc:
                answers[i] = (None, exc)
        batch.feed(answers)
        return bool(answers)

    async def _transact(self, batch: Lockstep[Any], writes: list[int], answers: dict[int, Answer]) -> None:
        """Transactions of up to :data:`TRANSACTION_SIZE` entries; the updates of a
        committed one read back in bulk (:meth:`read`)."""
        pending = list(writes)
        while pending:
            chunk, pending = pending[:TRANSACTION_SIZE], pending[TRANSACTION_SIZE:]
            try:
                answer = await self.store.transact([batch.steps[i].request for i in chunk])
            except TransactionsUnsupported:
                raise
            except Exception as exc:
                answers.update((i, (None, exc)) for i in chunk)
                continue
            if isinstance(answer, Cancelled):
                pending = batch.cancelled(chunk, answer, answers) + pending
                continue
            unread = batch.unread(chunk, answer)
            read: BatchRead | Exception = BatchRead()
            if unread:
                try:
                    read = await self.read(unread)
                except Exception as exc:  # committed, but not read: the calls read again
                    read = exc
            batch.committed(chunk, answer, read, answers)

    # -- between attempts ----------------------------------------------------------------

    def _retrying(self, *retry_on: type[BaseException]) -> tenacity.AsyncRetrying:
        retrying = self.retry.async_retrying(tenacity.retry_if_exception_type(retry_on))
        retrying.before_sleep = self._before_retry
        return retrying

    def _before_retry(self, state: tenacity.RetryCallState) -> None:
        self.stats.add("retries")
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, Transient):
            log.debug("retrying after a transient error: %r", error.error)

    def _remember(self, call: Call[Any]) -> None:
        """Keep what ``call`` learned of its chain, and count its events."""
        if call.known is not None:
            self.cache.put(call.tag, call.known)
        elif call.gone:
            self.cache.discard(call.tag)
        for event, count in call.events.items():
            if count:
                self.stats.add(event, count)
