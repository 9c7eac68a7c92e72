"""The synchronous driver: runs sans-IO calls against a store under a retry budget.

The store implements the primitives (:class:`ChainStore`); the calls hold the rules;
the engine only moves requests and replies between them, sleeps between rounds as the
:class:`~xor_ack_dynamodb.RetryPolicy` says, and keeps the last known value of recently
used chains. ``aio.AsyncEngine`` is the same loop with ``await``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import tenacity

from ..cache import LastKnown
from ..errors import BatchIncomplete
from ..model import ChainStatus
from ..retry import RetryPolicy
from ..stats import RequestStats
from .calls import Again, Call, Transient
from .chain import Chain
from .messages import Reply, Request
from .rules import ChainRules

__all__ = ["ChainStore", "BatchRead", "Engine", "BATCH_SIZE"]

log = logging.getLogger("xor_ack_dynamodb")

T = TypeVar("T")

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


class _Unprocessed(Exception):
    """A batch read left keys unprocessed: back off and ask for them again."""


class Engine:
    """Runs calls on ``store`` for one tracker. Thread-safe (the store's client is)."""

    def __init__(
        self,
        store: ChainStore,
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

    def run(self, call: Call[T]) -> T:
        """Run ``call`` to its result. Raises the call's error; :class:`StaleLocalData`
        when the budget is spent on lost races; the store's own exception when transient
        failures outlast it."""
        retrying = self.retry.retrying(tenacity.retry_if_exception_type((Again, Transient)))
        retrying.before_sleep = self._before_retry
        try:
            result: T = retrying(self._round, call)
            return result
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
            if isinstance(last, Again):
                raise call.exhausted(exc.last_attempt.attempt_number) from None
            assert isinstance(last, Transient)
            raise last.error from None
        finally:
            self._remember(call)

    def _round(self, call: Call[T]) -> T:
        round_ = call.round(self.now())
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = round_.throw(error) if error is not None else round_.send(reply)
            except StopIteration as stop:
                result: T = stop.value
                return result
            error = None
            try:
                reply = self.store.execute(request)
            except Exception as exc:
                reply, error = None, Transient(exc) if self.store.is_transient(exc) else exc

    def _remember(self, call: Call[Any]) -> None:
        if call.known is not None:
            self.cache.put(call.tag, call.known)
        elif call.gone:
            self.cache.discard(call.tag)
        for event, count in call.events.items():
            if count:
                self.stats.add(event, count)

    def _before_retry(self, state: tenacity.RetryCallState) -> None:
        self.stats.add("retries")
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, Transient):
            log.debug("retrying after a transient error: %r", error.error)

    def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """Statuses of ``tags`` (already checked), :data:`BATCH_SIZE` per read,
        unprocessed keys asked again with backoff. Tags with no chain are absent; an
        item that cannot be decoded is reported ``corrupt`` instead of failing the call.
        Raises :class:`BatchIncomplete` when keys are still unprocessed at the end of the
        budget."""
        wanted = list(dict.fromkeys(tags))
        found: dict[str, ChainStatus] = {}
        for start in range(0, len(wanted), BATCH_SIZE):
            for tag, status in self._read_batch(wanted[start : start + BATCH_SIZE]).items():
                found[tag] = status
        return {t: found[t] for t in wanted if t in found}

    def _read_batch(self, tags: list[str]) -> dict[str, ChainStatus]:
        found: dict[str, ChainStatus] = {}
        pending = tags
        retrying = self.retry.retrying(tenacity.retry_if_exception_type((_Unprocessed, Transient)))
        retrying.before_sleep = self._before_retry

        def attempt() -> None:
            nonlocal pending
            try:
                batch = self.store.read_many(pending)
            except Exception as exc:
                if self.store.is_transient(exc):
                    raise Transient(exc) from exc
                raise
            now = self.now()
            for chain in batch.chains:
                found[chain.tag] = self.rules.status(chain, now)
            for tag, why in batch.corrupt.items():
                found[tag] = ChainStatus(tag=tag, state="corrupt", value=None, expires_at=None, reason=why)
            pending = batch.unprocessed
            if pending:
                raise _Unprocessed

        try:
            retrying(attempt)
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
            if isinstance(last, _Unprocessed):
                raise BatchIncomplete(
                    f"{len(pending)} keys still unprocessed after the retry budget"
                ) from None
            assert isinstance(last, Transient)
            raise last.error from None
        return found
