"""What the trackers and drivers of both flavours share and never awaits, written once
here (``_async/`` holds only what waits, since ``_sync/`` is generated from it).

Each public tracker method's signature and docstring are written once, on the method of
:class:`TrackerBase` that checks its arguments and builds its call; :func:`signed` gives
them to the sync and asyncio methods that run the call, and :func:`same_signature`
passes them on to the protocols.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import tenacity

from ..core.algebra import EdgeLike, Mode
from ..core.batch import TRANSACTION_SIZE, BatchResult, EndpointWatch, chunks
from ..core.calls import (
    Call,
    CreateCall,
    DeleteCall,
    FailCall,
    StatusCall,
    TouchCall,
    Transient,
    first_outcome,
)
from ..core.chain import Chain, Op
from ..core.factory import CallFactory, StampSpec, chain_pairs
from ..core.messages import Rejected
from ..core.rules import ChainRules
from ..core.stamping import AddCall, StampCall
from ..core.verdicts import StampPlan
from ..errors import XorAckError
from ..retry import RetryPolicy
from ..stamps import Position, Stamp, Sum, check_tags
from ..stats import RequestStats
from ..status import ChainStatus
from .cache import HISTORY_BLOCKS, LastKnown
from .fanout import Progress, check_batch_options

log = logging.getLogger("xor_ack_dynamodb")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def same_signature(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[[Callable[..., Any]], Callable[Concatenate[Any, P], R]]:
    """Give the decorated protocol member ``method``'s signature (its ``self`` any
    class's) and docstring; ``inspect.signature`` shows it too (``__wrapped__``)."""
    return lambda member: functools.update_wrapper(member, method, assigned=("__doc__",))


def signed(
    builder: Callable[Concatenate[Any, P], object],
) -> Callable[[Callable[..., R]], Callable[Concatenate[Any, P], R]]:
    """Give the decorated tracker method ``builder``'s parameters and docstring, keeping
    its own result (a coroutine's, for the asyncio tracker). ``builder`` binds the
    arguments, so a wrong one raises its ``TypeError``: named after the method."""

    def sign(method: Callable[..., R]) -> Callable[Concatenate[Any, P], R]:
        builder.__qualname__ = method.__name__
        result = inspect.signature(method).return_annotation
        method.__signature__ = inspect.signature(builder).replace(return_annotation=result)  # type: ignore[attr-defined]
        method.__doc__ = builder.__doc__
        return method

    return sign


def tested_at(reply: Rejected, now: int) -> Rejected:
    """``reply``, carrying the clock reading its request was tested with."""
    if reply.at is None or reply.at < now:
        return Rejected(reply.current, reply.resent, now)
    return reply


def raise_transient(exc: tenacity.RetryError) -> None:
    """Raise the store's own error (botocore's original) if transient failures spent the budget."""
    last = exc.last_attempt.exception()
    if isinstance(last, Transient):
        raise last.error from last.error.__cause__


class DatedBase:
    """The store as the driver's loops use it: a request whose condition tests a chain's
    deadline (:data:`~xor_ack_dynamodb.core.messages.DATED`), each entry of a
    transaction alike, is dated with the clock read just before it goes to the store,
    and its rejection carries that reading (``Rejected.at``): a round that waited
    seconds on reads still tests its write against the clock as it goes out. Every
    other attribute is the store's (``is_transient``, ``read_many``, its ``client``)."""

    store: Any

    def __init__(self, store: Any, now: Callable[[], int]) -> None:
        self.store = store
        self.now = now

    def __getattr__(self, name: str) -> Any:
        if name == "store":  # not set yet (a copy being made): never recurse
            raise AttributeError(name)
        return getattr(self.store, name)


def pool_limit(limit: int, client: Any) -> int:
    """How many groups of a batch run at once: ``limit`` (checked), at most ``client``'s
    ``max_pool_connections`` (more threads than connections would open connections the
    pool discards). One by default: moto in process is not thread-safe, and a server
    answering one request at a time only queues the others towards their read timeout."""
    pool = getattr(getattr(getattr(client, "meta", None), "config", None), "max_pool_connections", None)
    return min(limit, pool) if isinstance(pool, int) and pool >= 1 else limit


class Groups(Generic[T]):
    """A batch's calls (on distinct chains, else ``ValueError``) in groups of
    :data:`TRANSACTION_SIZE`, each run in lockstep (:mod:`xor_ack_dynamodb.core.batch`,
    whose ``Lockstep.give_up`` says which error a call ends with), and each call's
    outcome, in order. A dead endpoint ends the batch (``EndpointWatch``): groups not
    started are not sent."""

    def __init__(self, calls: Sequence[Call[T]], stats: RequestStats) -> None:
        if len({c.tag for c in calls}) != len(calls):
            raise ValueError("run_many() takes calls on distinct chains")
        self.groups = chunks(calls, TRANSACTION_SIZE)
        self.settled: list[list[T | Exception]] = [[] for _ in self.groups]
        self.watch, self.stats, self.skipped = EndpointWatch(), stats, 0

    def unsent(self, n: int) -> bool:
        """Whether group ``n`` is not to be sent, the endpoint being dead; then each of
        its calls holds the endpoint's error (counted ``unsent``, logged once)."""
        dead = self.watch.dead()
        if dead is None:
            return False
        if not self.skipped:
            text = "%d groups in a row found the endpoint unreachable: not sending the rest (%s)"
            log.warning(text, self.watch.limit, dead)
        group = self.groups[n]
        self.settled[n] = [*self.watch.unsent([c.tag for c in group], dead)]
        self.skipped += len(group)
        self.stats.add("unsent", len(group))
        return True

    def settle(self, n: int, outcomes: list[T | Exception]) -> None:
        self.settled[n] = outcomes
        self.watch.record(outcomes)

    def outcomes(self) -> list[T | Exception]:
        return [outcome for group in self.settled for outcome in group]


class BackOff(Exception):
    """A batch is not done (a read left keys unprocessed; calls are still waiting or must
    run another round): back off, then go on."""


class DriverBase:
    """Runs calls for one tracker, under ``rules``, within ``retry``'s budget; ``clock``
    gives "now" (epoch seconds) to each round and dates each write. Keeps
    ``cache_size`` chains' last known values (0: none) and up to
    :data:`~.cache.HISTORY_BLOCKS` history blocks (never stale: a block never changes
    once written). Any number of threads (sync) or tasks of one event loop (asyncio) may
    run calls at once.

    A call interrupted while it waits on the store (a cancelled task, an interrupted
    thread) stops there: a request already sent may or may not be applied, as when a
    response is lost, and never twice (every write is conditional and carries its op
    id); calling again with the same ``op_id`` tells.
    """

    def __init__(
        self,
        rules: ChainRules,
        retry: RetryPolicy | None,
        stats: RequestStats | None,
        clock: Callable[[], float],
        cache_size: int,
    ) -> None:
        self.clock = clock
        self.rules = rules
        self.retry = retry or RetryPolicy()
        self.stats = stats or RequestStats()
        self.cache: LastKnown[Chain] = LastKnown(cache_size)
        self.history: LastKnown[tuple[Op, ...]] = LastKnown(HISTORY_BLOCKS)

    def now(self) -> int:
        """The clock, in whole epoch seconds."""
        return int(self.clock())

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


@dataclass(frozen=True)
class Batch(Generic[T]):
    """A batch call's calls (checked: on distinct chains) and how to run them."""

    calls: Sequence[Call[T]]
    concurrency: int | None
    progress: Progress | None
    transactions: bool

    def result(self, outcomes: Sequence[T | Exception]) -> BatchResult[T]:
        return BatchResult((call.tag, outcome) for call, outcome in zip(self.calls, outcomes, strict=True))


class TrackerBase:
    """Chains on ``driver``'s store, under ``driver``'s rules. Safe to share between
    threads (sync) or between the tasks of one event loop (asyncio). The guarantees of
    each method hold on every tracker (costs: docs/concepts.md)."""

    driver: DriverBase
    calls: CallFactory

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

    # -- the hooks ---------------------------------------------------------------------

    def stamped(self, tag: str, result: Stamp | Sum) -> None:
        """Called with the result of every stamp this tracker applied or recognised
        (also for stamps a ``CombiningTracker`` wrote for it). A no-op here;
        ``MemoryAck`` calls ``on_acked`` from it."""

    def timed_out(self, tag: str) -> bool:
        """Whether this tracker already reported ``tag`` timed out. False here;
        ``MemoryAck`` reports rotation's time-outs to ``on_failed``."""
        return False

    def failed(self, tag: str, reason: str | None) -> None:
        """Called when ``fail()`` failed a chain not reported timed out. A no-op
        here; ``MemoryAck`` calls ``on_failed`` from it."""

    # -- each public method: its signature and guarantees, its call built ---------------

    def _create_call(
        self,
        tag: str,
        value: EdgeLike,
        *,
        op_id: str | None = None,
        owner: str | None = None,
        replace_expired: bool = True,
    ) -> CreateCall:
        """Start a chain holding ``value`` (its root edge, or the combination of the
        edges started with it); it times out ``ttl`` from now. One request.

        A chain that timed out (deadline + skew passed), or a tombstone past its
        retention, is overwritten as a new lineage; with ``replace_expired=False`` a
        timed-out chain is kept (``TagExists``), decided by the write's condition, so
        never on a stale read. Idempotent per ``op_id`` for the chain's whole life: a
        create delivered again returns the chain's current value (``duplicate`` True),
        even after the chain expired, and never revives it. ``owner`` is stored with the
        chain; calls that name an owner are refused on another's chain. The result's
        ``position`` is the chain's start (seq 0).

        Raises :class:`TagExists` for a live chain with that tag, :class:`OpIdReused`
        for a known op id with another value, :class:`ZeroBufferNoOp` for a zero value,
        :class:`InvalidTag`/:class:`InvalidStamp`/:class:`InvalidConfig` for bad input
        (before any request is sent).
        """
        return self.calls.create(tag, value, op_id, owner, replace_expired)

    def _stamp_call(
        self,
        tag: str,
        value: EdgeLike | None = None,
        *,
        finished: Iterable[EdgeLike] = (),
        started: Iterable[EdgeLike] = (),
        op_id: str | None = None,
        owner: str | None = None,
        after: Position | None = None,
    ) -> AddCall | StampCall:
        """Apply one stamp: ``value``, or the edges this work ``finished`` and the edges
        of the children it ``started`` (xor mode XORs them all; sum mode adds the
        started and subtracts the finished). Returns the chain's new value; its
        ``acked`` is True for exactly one call: the one whose stamp completed the chain,
        and its ``position`` is where the op landed (pass it to the children this stamp
        started, as their ``after``).

        Guarantees: applied at most once per ``op_id`` for the chain's whole life
        (lineage), however many other stamps landed in between, and exactly once if
        the call returns; a duplicate returns the current value with ``duplicate`` True.
        Without an ``op_id`` a random one is used (covering botocore's resends and this
        library's retries); pass your own to cover redeliveries. The op is checked for
        earlier copies from the earliest point where one could exist: from ``after``
        (the ``position`` of the stamp that started this work), else from the chain's
        start; no transport metadata (a receive count) can prove there is no copy.
        Where the op ids kept in the item and its history blocks cannot tell (a missing
        block, a chain a foreign writer reset since, ops an older version dropped), it
        raises :class:`OutcomeUnknown` rather than guess. A Node package stamp resets the
        lineage: a stamp sent again after it with a bare op id is applied twice
        (docs/node-interop.md). Costs: docs/concepts.md, "Op ids".

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
        return self.calls.stamp(tag, value, finished, started, op_id, owner, known, after)

    def _create_many_calls(
        self,
        chains: Mapping[str, EdgeLike] | Iterable[tuple[str, EdgeLike]],
        *,
        op_ids: Mapping[str, str] | None = None,
        owner: str | None = None,
        replace_expired: bool = True,
        concurrency: int | None = None,
        progress: Progress | None = None,
        transactions: bool = True,
    ) -> Batch[Stamp | Sum]:
        """Start many chains (a mapping tag -> value, or (tag, value) pairs) together: on
        DynamoDB, transactions of up to 100 conditional puts, one put each where the
        backend has no transactions. Each chain gets exactly what :meth:`create` would
        give it, its value or its error, in the returned :class:`BatchResult`; the others
        are unaffected. Groups of 100 chains, each with the whole retry budget,
        ``concurrency`` and ``progress``: docs/concepts.md, "Many chains at once"; an
        exception ``progress`` raises stops the batch (groups not started are not sent).
        Once 2 groups in a row have ended with every chain ``EndpointUnreachable`` (or
        ``ConnectTimeout``), the groups not started are not sent and each of their chains
        holds an error of that type (nothing of it applied; counted in
        ``stats.events["unsent"]``). ``transactions=False`` sends one conditional write
        per chain instead. Bad input raises before any request,
        and nothing is written: ``InvalidConfig`` for a tag named twice (naming it),
        ``chains`` that are neither a mapping nor pairs, a concurrency below 1, a progress
        that is not callable; each chain's own bad input as :meth:`create` raises it."""
        check_batch_options(concurrency, progress, transactions)
        op_ids = op_ids or {}
        calls = [
            self.calls.create(
                tag, value, op_ids.get(tag) if isinstance(tag, str) else None, owner, replace_expired
            )
            for tag, value in chain_pairs(chains)
        ]
        return self._batch(calls, concurrency, progress, transactions)

    def _stamp_many_calls(
        self,
        stamps: Iterable[StampSpec],
        *,
        concurrency: int | None = None,
        progress: Progress | None = None,
        transactions: bool = True,
    ) -> Batch[StampPlan]:
        """Apply one stamp to each of many chains together: reads as BatchGetItem, writes
        as transactions of up to 100. Each stamp has the guarantees of :meth:`stamp`; its
        value or error is in the returned :class:`BatchResult`. Groups, ``concurrency``,
        ``progress``, ``transactions`` and a dead endpoint as in :meth:`create_many`. Bad
        input raises before any request, and nothing is written (``InvalidConfig`` for a
        chain named twice: one transaction cannot hold two writes of one item, so
        combine its stamps into one spec)."""
        check_batch_options(concurrency, progress, transactions)
        cache = self.driver.cache
        calls: list[Call[StampPlan]] = [
            self.calls.batch_stamp(
                spec, cache.get(tag) if isinstance(tag := getattr(spec, "tag", None), str) else None
            )
            for spec in stamps
        ]
        return self._batch(calls, concurrency, progress, transactions)

    def _stamped_many(self, plans: BatchResult[StampPlan]) -> BatchResult[Stamp | Sum]:
        """Each stamp's outcome (its value, or the error it ended with), the value
        reported to :meth:`stamped`."""
        out: BatchResult[Stamp | Sum] = BatchResult()
        for tag, plan in plans.items():
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

    def _touch_many_calls(
        self,
        tags: Iterable[str],
        ttl: timedelta | float | None = None,
        *,
        owner: str | None = None,
        concurrency: int | None = None,
        progress: Progress | None = None,
        transactions: bool = True,
    ) -> Batch[ChainStatus]:
        """Push the deadlines of many pending chains together (a heartbeat). Each chain
        gets what :meth:`touch` would give it, its status or its error, in the returned
        :class:`BatchResult`; the rest as in :meth:`create_many`. Bad input raises before
        any request, and nothing is written: ``InvalidConfig`` for a tag named twice and
        for a ``ttl`` as :meth:`touch` refuses it."""
        check_batch_options(concurrency, progress, transactions)
        calls = [self.calls.touch(tag, ttl, owner) for tag in check_tags(tags)]
        return self._batch(calls, concurrency, progress, transactions)

    def _batch(
        self, calls: Sequence[Call[T]], concurrency: int | None, progress: Progress | None, transactions: bool
    ) -> Batch[T]:
        """Raises :class:`InvalidConfig` for a chain named twice, before any request."""
        self.calls.distinct([c.tag for c in calls])
        return Batch(calls, concurrency, progress, transactions)

    def _fail_call(
        self, tag: str, reason: str | None = None, *, owner: str | None = None
    ) -> tuple[FailCall, str | None, bool]:
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
        return call, reason, self.timed_out(call.tag)

    def _touch_call(
        self, tag: str, ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> TouchCall:
        """Push a pending chain's deadline to ``ttl`` (default: the tracker's) from now,
        as Storm resets a tuple tree's timeout; one request. Returns the chain's status.

        Raises :class:`TagNotFound`, :class:`TagAcked`, :class:`TagFailed`,
        :class:`TagExpired` (a chain past its deadline is not revived: replay it),
        :class:`NotOwner`; :class:`InvalidConfig`, before any request, for a ``ttl``
        that is not a ``timedelta`` or a number of seconds more than 0 and at most 100
        years (``MAX_DURATION``), NaN and infinity included.
        """
        return self.calls.touch(tag, ttl, owner)

    def _status_call(self, tag: str) -> StatusCall:
        """The chain as it is now (a strongly consistent read). Raises :class:`TagNotFound`,
        :class:`CorruptItem` for an item that cannot be read (an attribute of the wrong
        type, a deadline no date can hold)."""
        return self.calls.status(tag)

    def _status_many_tags(
        self, tags: Iterable[str], *, concurrency: int | None = None, progress: Progress | None = None
    ) -> tuple[list[str], int | None, Progress | None]:
        """The status of many chains, strongly consistent (on DynamoDB: BatchGetItem, 100
        keys a request, each with the whole retry budget; ``concurrency`` and
        ``progress`` as in :meth:`create_many`). Returns a :class:`StatusResult`: the
        chains found, by tag, and the tags with no chain in ``missing``; an item that
        cannot be decoded reads ``corrupt``. Never a partial result: raises
        :class:`BatchIncomplete` if keys are still unprocessed when a request's budget is
        spent, the store's error when transient failures outlast it."""
        check_batch_options(concurrency, progress)
        return check_tags(tags), concurrency, progress

    def _delete_call(self, tag: str) -> DeleteCall:
        """Delete the chain whatever its state. Raises :class:`TagNotFound` if there is
        none, unless the request had to be sent again (by botocore or by this library's
        retry), since the first attempt may be the one that deleted it."""
        return self.calls.delete(tag)
