"""The synchronous driver: runs sans-IO calls against a store under a retry budget.

The store implements the primitives (:class:`ChainStore`); the calls hold the rules;
the engine only moves requests and replies between them, sleeps between rounds as the
:class:`~xor_ack_dynamodb.RetryPolicy` says, and keeps the last known value of recently
used chains. ``aio.AsyncEngine`` is the same loop with ``await``: both step rounds with
:class:`Step` and share everything but the I/O through :class:`EngineBase`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import tenacity

from ..core.calls import Again, Call, Round, Transient
from ..core.chain import Chain
from ..core.messages import Cancelled, Committed, Reply, Request
from ..core.rules import ChainRules
from ..errors import BatchIncomplete
from ..retry import RetryPolicy
from ..stats import RequestStats
from ..status import ChainStatus
from .cache import LastKnown

__all__ = ["ChainStore", "BatchRead", "Engine", "EngineBase", "Step", "Unprocessed", "BATCH_SIZE"]

log = logging.getLogger("xor_ack_dynamodb")

T = TypeVar("T")
S = TypeVar("S")

#: Keys per BatchGetItem request (DynamoDB's limit).
BATCH_SIZE = 100


@dataclass
class BatchRead:
    """What one batch read returned: the chains found, the items that could not be
    decoded (tag -> why), and the tags the store did not get to (to ask again)."""

    chains: list[Chain] = field(default_factory=list)
    corrupt: dict[str, str] = field(default_factory=dict)
    unprocessed: list[str] = field(default_factory=list)


class ChainStore(Protocol):
    """The primitives a store implements: one atomic request at a time, and batch reads.

    ``execute`` answers a :class:`~.messages.Read` with a chain or None and every other
    request with a :class:`~.messages.Written` or :class:`~.messages.Rejected`; it raises
    on failure. ``is_transient`` tells failures after which the request may or may not
    have been applied and that are worth another attempt.
    """

    def execute(self, request: Request) -> Reply | Chain | None: ...

    def is_transient(self, error: BaseException) -> bool: ...

    def read_many(self, tags: list[str]) -> BatchRead: ...

    def transact(self, requests: list[Request]) -> Committed | Cancelled:
        """Apply ``requests`` (on distinct chains) all or none; raises
        :class:`~.messages.TransactionsUnsupported` where the backend has no transactions."""
        ...


class Unprocessed(Exception):
    """A batch read left keys unprocessed: back off and ask for them again."""


class Step(Generic[T]):
    """One round of a call, stepped by a driver: send :attr:`request` to the store, then
    hand back its :meth:`reply` or the exception it raised (:meth:`failed`), until
    :attr:`done`; then :attr:`result` is the round's result. The round's own errors
    (:class:`Again`, :class:`Transient`, the call's typed errors) propagate from
    :meth:`reply` / :meth:`failed`. Both drivers step rounds with this, so the only
    difference between them is whether the store is awaited."""

    def __init__(self, round_: Round[T], is_transient: Callable[[BaseException], bool]) -> None:
        self._round = round_
        self._is_transient = is_transient
        self.done = False
        self.request: Request  # set by the first step unless the round ends at once
        self.result: T
        self._advance(None, None)

    def reply(self, reply: Reply | Chain | None) -> None:
        self._advance(reply, None)

    def failed(self, error: Exception) -> None:
        """The store raised ``error``: thrown into the round as :class:`Transient` when
        the store calls it transient, as itself otherwise."""
        self._advance(None, Transient(error) if self._is_transient(error) else error)

    def _advance(self, reply: Any, error: BaseException | None) -> None:
        try:
            self.request = self._round.throw(error) if error is not None else self._round.send(reply)
        except StopIteration as stop:
            self.done, self.result = True, stop.value


class EngineBase(Generic[S]):
    """What the sync :class:`Engine` and ``aio.AsyncEngine`` share: the store, rules,
    budget, stats, clock and cache, and everything a driver does between requests
    (stepping rounds, remembering what a call learned, counting retries, turning a spent
    budget into the error to raise, reading a batch's answer)."""

    def __init__(
        self,
        store: S,
        rules: ChainRules,
        *,
        retry: RetryPolicy | None = None,
        stats: RequestStats | None = None,
        clock: Callable[[], float] = time.time,
        cache_size: int = 10_000,
    ) -> None:
        self.store = store
        self.rules = rules
        self.retry = retry or RetryPolicy()
        self.stats = stats or RequestStats()
        self.clock = clock
        self.cache: LastKnown[Chain] = LastKnown(cache_size)

    def now(self) -> int:
        return int(self.clock())

    def step(self, call: Call[T], is_transient: Callable[[BaseException], bool]) -> Step[T]:
        """A new round of ``call``, at the engine's now."""
        return Step(call.round(self.now()), is_transient)

    def remember(self, call: Call[Any]) -> None:
        """Keep what ``call`` learned of its chain, and count its events."""
        if call.known is not None:
            self.cache.put(call.tag, call.known)
        elif call.gone:
            self.cache.discard(call.tag)
        for event, count in call.events.items():
            if count:
                self.stats.add(event, count)

    def before_retry(self, state: tenacity.RetryCallState) -> None:
        self.stats.add("retries")
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, Transient):
            log.debug("retrying after a transient error: %r", error.error)

    @staticmethod
    def spent(exc: tenacity.RetryError, call: Call[Any]) -> BaseException:
        """The error to raise when ``call``'s budget is spent: :class:`StaleLocalData`
        after lost races, the store's own exception after transient failures."""
        last = exc.last_attempt.exception()
        if isinstance(last, Again):
            return call.exhausted(exc.last_attempt.attempt_number)
        assert isinstance(last, Transient)
        return last.error

    @staticmethod
    def batches(tags: Iterable[str]) -> tuple[list[str], list[list[str]]]:
        """The distinct tags in order, and them in reads of :data:`BATCH_SIZE`."""
        wanted = list(dict.fromkeys(tags))
        return wanted, [wanted[i : i + BATCH_SIZE] for i in range(0, len(wanted), BATCH_SIZE)]

    def absorb(self, batch: BatchRead, found: dict[str, ChainStatus]) -> list[str]:
        """Add one batch read's chains (and undecodable items, as ``corrupt``) to
        ``found``; return the tags still to ask for."""
        now = self.now()
        for chain in batch.chains:
            found[chain.tag] = self.rules.status(chain, now)
        for tag, why in batch.corrupt.items():
            found[tag] = ChainStatus(tag=tag, state="corrupt", value=None, expires_at=None, reason=why)
        return batch.unprocessed

    @staticmethod
    def batch_spent(exc: tenacity.RetryError, pending: list[str]) -> BaseException:
        """The error to raise when a batch read's budget is spent."""
        last = exc.last_attempt.exception()
        if isinstance(last, Unprocessed):
            return BatchIncomplete(f"{len(pending)} keys still unprocessed after the retry budget")
        assert isinstance(last, Transient)
        return last.error


class Engine(EngineBase[ChainStore]):
    """Runs calls on ``store`` for one tracker. Thread-safe (the store's client is)."""

    def run(self, call: Call[T]) -> T:
        """Run ``call`` to its result. Raises the call's error; :class:`StaleLocalData`
        when the budget is spent on lost races; the store's own exception when transient
        failures outlast it."""
        retrying = self.retry.retrying(tenacity.retry_if_exception_type((Again, Transient)))
        retrying.before_sleep = self.before_retry
        try:
            result: T = retrying(self._round, call)
            return result
        except tenacity.RetryError as exc:
            raise self.spent(exc, call) from None
        finally:
            self.remember(call)

    def run_many(self, calls: Sequence[Call[T]]) -> list[T | Exception]:
        """Run calls on distinct chains together (see :mod:`.batch`): their reads in
        bulk, their writes in transactions. Returns each call's result or error."""
        from .batch import run_many

        return run_many(self, calls)

    def _round(self, call: Call[T]) -> T:
        step = self.step(call, self.store.is_transient)
        while not step.done:
            try:
                reply = self.store.execute(step.request)
            except Exception as exc:
                step.failed(exc)
            else:
                step.reply(reply)
        return step.result

    def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """Statuses of ``tags`` (already checked), :data:`BATCH_SIZE` per read,
        unprocessed keys asked again with backoff. Tags with no chain are absent; an
        item that cannot be decoded is reported ``corrupt`` instead of failing the call.
        Raises :class:`BatchIncomplete` when keys are still unprocessed at the end of the
        budget."""
        wanted, batches = self.batches(tags)
        found: dict[str, ChainStatus] = {}
        for batch in batches:
            found.update(self._read_batch(batch))
        return {t: found[t] for t in wanted if t in found}

    def _read_batch(self, tags: list[str]) -> dict[str, ChainStatus]:
        found: dict[str, ChainStatus] = {}
        pending = tags
        retrying = self.retry.retrying(tenacity.retry_if_exception_type((Unprocessed, Transient)))
        retrying.before_sleep = self.before_retry

        def attempt() -> None:
            nonlocal pending
            try:
                batch = self.store.read_many(pending)
            except Exception as exc:
                if self.store.is_transient(exc):
                    raise Transient(exc) from exc
                raise
            pending = self.absorb(batch, found)
            if pending:
                raise Unprocessed

        try:
            retrying(attempt)
        except tenacity.RetryError as exc:
            raise self.batch_spent(exc, pending) from None
        return found
