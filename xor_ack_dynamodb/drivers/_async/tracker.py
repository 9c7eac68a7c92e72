"""The methods every tracker shares: check arguments, build a call, run it on a driver.

:class:`~xor_ack_dynamodb.XorAckDynamoDB`, :class:`~xor_ack_dynamodb.MemoryAck` and their
asyncio twins are this class on different stores; the guarantees below hold on each (the
costs quoted are DynamoDB's). Written once for asyncio; the sync class is generated from
it by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TypeVar

from ...config import TrackerOptions
from ...core.algebra import EdgeLike, Mode
from ...core.batch import BatchResult, StatusResult
from ...core.calls import Call, first_outcome
from ...core.factory import CallFactory, StampSpec, chain_pairs
from ...core.rules import ChainRules
from ...core.stamping import StampCall
from ...core.verdicts import StampPlan
from ...errors import XorAckError
from ...stamps import Position, Stamp, Sum, check_tags
from ...stats import RequestStats
from ...status import ChainStatus
from ..fanout import Progress, check_batch_options
from .driver import AsyncChainStore, AsyncDriver

__all__ = ["AsyncTracker"]

T = TypeVar("T")


class AsyncTracker:
    """Chains on ``driver``'s store, under ``driver``'s rules. Safe to share between
    threads (sync) or between the tasks of one event loop (asyncio)."""

    driver: AsyncDriver
    calls: CallFactory

    def _bind(
        self, store: AsyncChainStore, rules: ChainRules, options: TrackerOptions, stats: RequestStats
    ) -> None:
        budget, clock, size = options.budget, options.clock, options.cache_size
        self.driver = AsyncDriver(store, rules, retry=budget, stats=stats, clock=clock, cache_size=size)
        self.calls = CallFactory(rules, self.driver.history)

    @property
    def rules(self) -> ChainRules:
        return self.driver.rules

    @property
    def stats(self) -> RequestStats:
        """Requests made (what DynamoDB bills) and events (``conflicts``, ``retries``,
        ``duplicates``, ``completions``, ``trims``...)."""
        return self.driver.stats

    @property
    def mode(self) -> Mode:
        """``"xor"`` or ``"sum"``."""
        return self.driver.rules.mode

    @property
    def max_ops(self) -> int:
        """The op-id window of the chains this tracker creates."""
        return self.driver.rules.window

    def new_edge(self) -> Stamp | int:
        """A random edge for this tracker's mode: random bytes (never all zeros) in xor
        mode, an int in [1, 2**63) in sum mode. No I/O (never awaited)."""
        return self.driver.rules.algebra.new_edge()

    async def create(
        self,
        tag: str,
        value: EdgeLike,
        *,
        op_id: str | None = None,
        owner: str | None = None,
        replace_expired: bool = True,
    ) -> Stamp | Sum:
        """Start a chain holding ``value`` (its root edge, or the combination of the
        edges started with it); it times out ``ttl`` from now. One request.

        A chain that timed out (deadline + skew passed), or a tombstone past its
        retention, is overwritten, as a new lineage (its ops, history and positions
        are the new chain's own). With ``replace_expired=False`` a chain that timed out
        is kept instead (``TagExists``), decided on the chain as it is when the write is
        made (its condition), so a chain that times out between a status read and the
        create is never overwritten. Idempotent per ``op_id`` for the chain's whole
        life: a create delivered again (botocore resending it, a retried task, a
        redelivered message) returns the chain's current value (``duplicate`` True)
        instead of raising, even after the chain expired, and never revives it.
        ``owner`` is stored with the chain; calls that name an owner are refused on
        another's chain. The result's ``position`` is the chain's start (seq 0).

        Raises :class:`TagExists` for a live chain with that tag, :class:`OpIdReused`
        for a known op id with another value, :class:`ZeroBufferNoOp` for a zero value,
        :class:`InvalidTag`/:class:`InvalidStamp`/:class:`InvalidConfig` for bad input
        (before any request is sent).
        """
        return await self.driver.run(self.calls.create(tag, value, op_id, owner, replace_expired))

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
    ) -> Stamp | Sum:
        """Apply one stamp: ``value``, or the edges this work ``finished`` and the edges
        of the children it ``started`` (xor mode XORs them all; sum mode adds the
        started and subtracts the finished). Returns the chain's new value; its
        ``acked`` is True for exactly one call: the one whose stamp completed the chain,
        and its ``position`` is where the op landed (pass it to the children this stamp
        started, as their ``after``).

        Guarantees: applied at most once per ``op_id`` for the chain's whole life
        (lineage), however many other stamps landed in between, and exactly once if
        the call returns. A duplicate returns the current value with ``duplicate``
        True. Without an ``op_id`` a random one is used: that covers botocore's resends
        and this library's retries; pass your own to cover redeliveries. A stamp's op
        id is remembered in the chain's item while it is among the recent ops, then in
        its history items (blocks of 40, beside it); where that history is gone (a
        missing block, a chain a foreign writer reset since, ops an older version
        dropped), the stamp raises :class:`OutcomeUnknown` rather than guess.

        Where the check starts: an op is checked for earlier copies from the earliest
        point where one could exist. With ``after=position`` (the ``position`` of the
        stamp that started this work: no copy of it can land before that), from there;
        with an ``op_id`` and no ``after``, from the chain's start (its lineage). Only
        an op id the library draws itself (no ``op_id``) needs no check. No transport
        metadata (a receive count, a re-sent flag) can say that no other copy exists:
        botocore resends a ``SendMessageBatch`` whose response was lost, standard
        queues deliver twice, a DLQ redrive starts counts again.

        What the check costs: while the bound is inside the item's window (the item
        holds every op after it), nothing beyond the write: one request. Past it, the
        history blocks after the bound are read once (a BatchGetItem of up to 100
        blocks of 40 ops); blocks never change once written, so the tracker keeps them
        and the stamps of one parent's children handled by one process read each block
        once (in sum mode a stale view costs a refused ADD and the read of the new
        blocks).

        Foreign writers: a stamp by the Node package replaces the item with ``{tag,
        stamp}`` (a PutItem), dropping its op list and lineage, or deletes it when its
        XOR reaches zero (then this call raises :class:`TagNotFound`). A stamp sent again
        after such a write with the same op id cannot be recognised from the item: with
        ``after`` a position of the lineage before the reset, it raises
        :class:`OutcomeUnknown` and writes nothing (that lineage's last ops are lost, so
        its history is not searched). A bare op id is checked from the reset on only, so
        a stamp applied before a Node write and sent again after it with only its op id
        is applied twice.

        Cost: xor mode reads and writes conditionally (one request when this tracker
        knows the chain's last value, two otherwise; a lost race costs another round;
        one more, a history write, every 40 stamps); sum mode is one ``UpdateItem``
        whatever the concurrency (plus, once per chain, the write that stores ``acked``,
        and a history write and a trim per 40 stamps).

        A lost race is retried within the retry budget; once spent,
        :class:`StaleLocalData` is raised and nothing was applied by this call unless a
        transient error (or a cancelled task) hid an outcome, in which case calling
        again with the same ``op_id`` tells.

        Raises :class:`TagNotFound`, :class:`TagFailed`, :class:`TagExpired`,
        :class:`TagAcked` for a chain in that state (:class:`TagFailed` too, with the
        reason, for the sum-mode stamp that took a chain's sum below zero: proof that
        some stamp was applied twice, so the chain is failed at once);
        :class:`NotOwner`; :class:`OpIdReused` for a known op id with another stamp;
        :class:`ChainModeMismatch`; :class:`OutcomeUnknown` (see above);
        :class:`BufferLengthsUnequal`, :class:`ZeroBufferNoOp`,
        :class:`InvalidTag`/:class:`InvalidStamp`/:class:`InvalidConfig` for bad input
        (before any request); when transient failures outlast the budget, a
        :class:`~xor_ack_dynamodb.errors.RequestFailed` (``EndpointUnreachable``,
        ``ReadTimeout``, ...: the write may have landed only where it says so, and
        calling again with the same ``op_id`` tells) or the service's ``ClientError`` (a
        throttle).
        """
        known = self.driver.cache.get(tag) if isinstance(tag, str) else None
        call = self.calls.stamp(tag, value, finished, started, op_id, owner, known, after)
        if isinstance(call, StampCall):
            result = await self._run_stamp(call)
        else:
            result = await self.driver.run(call)
        self.stamped(call.tag, result)
        return result

    async def _run_stamp(self, call: StampCall) -> Stamp | Sum:
        """Run one checked conditional stamp (every stamp but a sum-mode ADD); its
        outcome, or its error raised. ``CombiningTracker`` queues it instead, to share
        the write with concurrent stamps on the tag."""
        return first_outcome(await self.driver.run(call))

    def stamped(self, tag: str, result: Stamp | Sum) -> None:
        """Called with the result of every stamp this tracker applied or recognised
        (also for stamps a ``CombiningTracker`` wrote for it). A no-op here;
        ``MemoryAck`` calls ``on_acked`` from it."""

    # -- many chains at once ---------------------------------------------------------

    async def create_many(
        self,
        chains: Mapping[str, EdgeLike] | Iterable[tuple[str, EdgeLike]],
        *,
        op_ids: Mapping[str, str] | None = None,
        owner: str | None = None,
        replace_expired: bool = True,
        concurrency: int | None = None,
        progress: Progress | None = None,
        transactions: bool = True,
    ) -> BatchResult[Stamp | Sum]:
        """Start many chains (a mapping tag -> value, or (tag, value) pairs) together: on
        DynamoDB, transactions of up to 100 conditional puts (one request per 100 chains,
        two write units per KB of each item), one put each where the backend has no
        transactions. Each chain gets exactly what :meth:`create` would give it: its
        value, or the error (``TagExists`` for a live chain, ...), in the returned
        :class:`BatchResult` (a dict by tag, with ``.failed``, ``.failures_by_type()``,
        ``.summary()``); the others are unaffected.

        A batch of any size runs in groups of 100 chains, each with the whole retry
        budget, so it ends within about ``groups / concurrency`` budgets;
        ``concurrency`` groups run at once (default 1; at most the client's
        ``max_pool_connections``, botocore's default 10; threads, or tasks of the loop
        for the asyncio tracker); ``progress(done, total)`` is called in the caller's
        thread (or task) with 0, then with the chains settled after each group (an
        exception it raises stops the batch: groups not started are not sent). A dead
        endpoint ends the batch promptly: once 2 groups in a row have ended with every
        chain ``EndpointUnreachable`` (or ``ConnectTimeout``) through their retry
        budget, the groups not started are not sent, and each of their chains holds an
        error of that type saying so (nothing of it was applied; ``stats.events
        ["unsent"]`` counts them); a throttle, a read timeout or any answer keeps the
        batch going. ``transactions=False`` sends one conditional write per chain
        instead (one write unit per KB where a transaction bills two; one request per
        chain; what a backend without transactions gets anyway, and the way around the
        stock ``moto_server``, whose transactions copy the whole table once per entry
        and keep the copies: ``python -m xor_ack_dynamodb.testing.serve`` is the same
        server without that). Bad input raises
        before any request, and nothing is written: ``InvalidConfig`` for a tag named
        twice among the pairs (naming it), ``chains`` that are neither a mapping nor
        pairs, a concurrency below 1, a progress that is not callable; each chain's
        own bad input as :meth:`create` raises it."""
        check_batch_options(concurrency, progress, transactions)
        op_ids = op_ids or {}
        calls = [
            self.calls.create(
                tag, value, op_ids.get(tag) if isinstance(tag, str) else None, owner, replace_expired
            )
            for tag, value in chain_pairs(chains)
        ]
        return await self._run_many(calls, concurrency, progress, transactions)

    async def stamp_many(
        self,
        stamps: Iterable[StampSpec],
        *,
        concurrency: int | None = None,
        progress: Progress | None = None,
        transactions: bool = True,
    ) -> BatchResult[Stamp | Sum]:
        """Apply one stamp to each of many chains together: their reads as BatchGetItem
        and their conditional writes as transactions of up to 100 (one request per 100
        chains each way, in either mode). Each stamp has the guarantees of
        :meth:`stamp` (op ids, owners, exactly one ``acked``); its value or error is in
        the returned :class:`BatchResult`. Groups, ``concurrency``, ``progress``,
        ``transactions`` and the end of a batch on a dead endpoint as in
        :meth:`create_many`. Bad input raises before any request,
        and nothing is written (``InvalidConfig`` for a chain named twice, naming it: one
        transaction cannot hold two writes of one item, so combine its stamps into one
        spec, its ``finished`` and ``started`` edges together)."""
        check_batch_options(concurrency, progress, transactions)
        cache = self.driver.cache
        calls: list[Call[StampPlan]] = [
            self.calls.batch_stamp(
                spec, cache.get(tag) if isinstance(tag := getattr(spec, "tag", None), str) else None
            )
            for spec in stamps
        ]
        out: BatchResult[Stamp | Sum] = BatchResult()
        for tag, plan in (await self._run_many(calls, concurrency, progress, transactions)).items():
            if isinstance(plan, Exception):
                out[tag] = plan
                continue
            try:
                out[tag] = outcome = first_outcome(plan)
            except XorAckError as error:
                out[tag] = error
                continue
            self.stamped(tag, outcome)
        return out

    async def touch_many(
        self,
        tags: Iterable[str],
        ttl: timedelta | float | None = None,
        *,
        owner: str | None = None,
        concurrency: int | None = None,
        progress: Progress | None = None,
        transactions: bool = True,
    ) -> BatchResult[ChainStatus]:
        """Push the deadlines of many pending chains together (a heartbeat): transactions
        of up to 100 conditional updates, and one batch read for their new values. Each
        chain gets what :meth:`touch` would give it, its status or its error
        (``TagAcked``, ``TagExpired``...), in the returned :class:`BatchResult`. Groups,
        ``concurrency``, ``progress``, ``transactions`` and the end of a batch on a dead
        endpoint as in :meth:`create_many`.
        Bad input raises before any request, and nothing is written: ``InvalidConfig``
        for a tag named twice (naming it) and for a ``ttl`` as :meth:`touch` refuses it."""
        check_batch_options(concurrency, progress, transactions)
        calls = [self.calls.touch(tag, ttl, owner) for tag in check_tags(tags)]
        return await self._run_many(calls, concurrency, progress, transactions)

    async def _run_many(
        self, calls: Sequence[Call[T]], concurrency: int | None, progress: Progress | None, transactions: bool
    ) -> BatchResult[T]:
        """``calls`` run together, their outcomes (results or errors) by tag. Raises
        :class:`InvalidConfig` for a chain named twice, before any request."""
        self.calls.distinct([c.tag for c in calls])
        outcomes = await self.driver.run_many(
            calls, concurrency=concurrency, progress=progress, transactions=transactions
        )
        return BatchResult((call.tag, outcome) for call, outcome in zip(calls, outcomes, strict=True))

    # -- one chain -------------------------------------------------------------------

    async def fail(self, tag: str, reason: str | None = None, *, owner: str | None = None) -> ChainStatus:
        """Mark a pending (or timed-out) chain failed, keeping it as a tombstone for
        ``retention``; one request. Failing a failed chain changes nothing (the first
        reason stays). Returns the chain's status. ``reason`` is kept whole: at most
        1,024 characters (``MAX_REASON``) are accepted, never cut silently
        (``fit_reason()`` shortens a longer one, saying so); an empty one is None.

        Raises :class:`TagNotFound`, :class:`TagAcked` for a chain that completed,
        :class:`NotOwner`; :class:`InvalidConfig`, before any request, for a reason that
        is not a ``str``, is longer than ``MAX_REASON`` or is not valid Unicode;
        :class:`InvalidTag` / :class:`InvalidConfig` for a bad tag or owner.
        """
        call = self.calls.fail(tag, reason, owner)
        reported = self.timed_out(call.tag)
        status, applied = await self.driver.run(call)
        if applied and not reported:
            self.failed(status.tag, reason)
        return status

    def timed_out(self, tag: str) -> bool:
        """Whether this tracker already reported ``tag`` timed out. False here;
        ``MemoryAck`` reports rotation's time-outs to ``on_failed``."""
        return False

    def failed(self, tag: str, reason: str | None) -> None:
        """Called when :meth:`fail` failed a chain not reported timed out. A no-op
        here; ``MemoryAck`` calls ``on_failed`` from it."""

    async def touch(
        self, tag: str, ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> ChainStatus:
        """Push a pending chain's deadline to ``ttl`` (default: the tracker's) from now,
        as Storm resets a tuple tree's timeout; one request. Returns the chain's status.

        Raises :class:`TagNotFound`, :class:`TagAcked`, :class:`TagFailed`,
        :class:`TagExpired` (a chain past its deadline is not revived: replay it),
        :class:`NotOwner`; :class:`InvalidConfig`, before any request, for a ``ttl``
        that is not a ``timedelta`` or a number of seconds more than 0 and at most 100
        years (``MAX_DURATION``), NaN and infinity included.
        """
        return await self.driver.run(self.calls.touch(tag, ttl, owner))

    async def status(self, tag: str) -> ChainStatus:
        """The chain as it is now (a strongly consistent read). Raises :class:`TagNotFound`,
        :class:`CorruptItem` for an item that cannot be read (an attribute of the wrong
        type, a deadline no date can hold)."""
        return await self.driver.run(self.calls.status(tag))

    async def status_many(
        self, tags: Iterable[str], *, concurrency: int | None = None, progress: Progress | None = None
    ) -> StatusResult:
        """The status of many chains (on DynamoDB: BatchGetItem, 100 keys a request,
        strongly consistent, unprocessed keys asked again with backoff, each request
        with the whole retry budget, ``concurrency`` at once as in :meth:`create_many`,
        ``progress(done, total)`` after each). Returns a :class:`StatusResult`: a dict of
        the chains found, by tag; the tags with no chain in its ``missing``; an item
        that cannot be decoded reads ``corrupt`` (the others are still returned). Never
        a partial result: raises :class:`BatchIncomplete` if keys are still unprocessed
        when a request's budget is spent, the store's error when transient failures
        outlast it."""
        check_batch_options(concurrency, progress)
        return await self.driver.status_many(check_tags(tags), concurrency=concurrency, progress=progress)

    async def delete(self, tag: str) -> None:
        """Delete the chain whatever its state. Raises :class:`TagNotFound` if there is
        none, unless the request had to be sent again (by botocore or by this library's
        retry), since the first attempt may be the one that deleted it."""
        await self.driver.run(self.calls.delete(tag))
