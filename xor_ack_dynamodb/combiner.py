"""Group commit for hot chains: concurrent stamps on one tag share one conditional write.

Without it, N threads stamping one chain race: every write is conditional on the value
its writer last saw, so all but one lose and try again, and a busy chain costs several
requests per stamp. :class:`CombiningTracker` queues the stamps a process makes on a
tag while a write for that tag is in flight; the next write carries their XOR and all
their op ids. One leader at a time writes for a tag; every other caller waits for its
own outcome.

It is opt-in: wrap the tracker where a process has hot chains (many threads on few
tags). On quiet chains it costs what ``stamp()`` costs (one request a stamp), so
wrapping everything is harmless too, but a plain tracker keeps the simplest path.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from .dynamodb import XorAckDynamoDB, _Conflict, _error_code, _retry_attempts
from .errors import BufferLengthsUnequal, TagNotFound, XorAckError, ZeroBufferNoOp
from .item import Chain
from .model import ChainStatus, op_key, random_op_key
from .stamps import Stamp, as_bytes, check_tag, xor_all
from .stats import RequestStats

if TYPE_CHECKING:
    from .config import AckConfig

__all__ = ["CombiningTracker"]

log = logging.getLogger("xor_ack_dynamodb")


@dataclass(eq=False)
class _Pending:
    """One caller's stamp waiting in a tag's queue, and later its outcome."""

    delta: bytes
    op: str
    wake: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # this caller writes the next batch for the tag
    settled: bool = False
    result: Stamp | None = None
    error: BaseException | None = None

    def settle(self, outcome: Stamp | BaseException) -> None:
        if isinstance(outcome, BaseException):
            self.error = outcome
        else:
            self.result = outcome
        self.settled = True
        self.wake.set()


@dataclass
class _Queue:
    """The stamps waiting for a tag. ``busy`` while a leader is writing for it."""

    waiting: list[_Pending] = field(default_factory=list)
    busy: bool = False


@dataclass
class _Plan:
    """A batch replayed in queue order on one value of the chain, as sequential
    ``stamp()`` calls would see it."""

    outcomes: list[Stamp | XorAckError] = field(default_factory=list)
    new: Stamp | None = None  # the value to write; None when nothing is applied
    ops: tuple[str, ...] = ()
    delete: bool = False  # the batch completes the chain and the tracker deletes on ack
    duplicates: int = 0


class CombiningTracker:
    """An :class:`~xor_ack_dynamodb.XorAckDynamoDB` whose ``stamp()`` combines the
    concurrent stamps of this process on one tag into one conditional write.

    Every other method is the wrapped tracker's. Share one per process (it is
    thread-safe); combining happens between the threads that share it.

    Guarantees of :meth:`stamp`, beyond those of ``XorAckDynamoDB.stamp``:

    * The stamps merged into one write are applied as if ``stamp()`` had been called for
      each, one after the other, in the order they queued: each caller gets the value
      after its own stamp (so exactly one caller of a completing batch sees
      ``acked``), a duplicate op id (already in the chain's op list, or twice in the
      batch) is applied once and returns the value at its turn, a stamp queued after the
      chain reached zero gets :class:`TagAcked` (:class:`TagNotFound` with
      ``delete_on_ack``), a stamp whose length differs from the chain's gets its own
      :class:`BufferLengthsUnequal`, and a failed or expired chain fails every caller
      with :class:`TagFailed` or :class:`TagExpired`.
    * Every op id of the batch is written to the chain's op list with the value, in one
      conditional write (the list keeps the last ``max_ops``, as one by one).
    * If the write cannot be made (the chain is gone: :class:`TagNotFound`; the retry
      budget is spent: :class:`StaleLocalData`, or a transient ``ClientError``), every
      caller in the batch gets that error and nothing of the batch was applied, unless
      a transient error hid the outcome: retrying with the same ``op_id`` tells, as for
      ``stamp()``.
    * A stamp is rejected for bad input (tag, stamp, op id, all-zero stamp) before it
      queues. Its length is checked against the chain when its batch is written, so a
      stamp of the wrong length fails alone, as it would one by one.
    * A caller interrupted while queued (``KeyboardInterrupt``) is taken out of the
      queue if no write has taken its stamp yet; otherwise the write goes ahead, as a
      ``stamp()`` interrupted mid-request may have landed.
    """

    def __init__(self, tracker: XorAckDynamoDB) -> None:
        if not isinstance(tracker, XorAckDynamoDB):
            raise TypeError(f"CombiningTracker wraps an XorAckDynamoDB, got {type(tracker).__name__}")
        self.tracker = tracker
        self._lock = threading.Lock()
        self._queues: dict[str, _Queue] = {}

    @classmethod
    def from_config(cls, config: AckConfig, client: Any = None) -> CombiningTracker:
        """A combining tracker built from a picklable :class:`~xor_ack_dynamodb.AckConfig`."""
        return cls(config.connect(client))

    def __repr__(self) -> str:
        return f"CombiningTracker({self.tracker!r})"

    @property
    def stats(self) -> RequestStats:
        """The wrapped tracker's counters, plus ``batches`` (combined writes made) and
        ``combined`` (stamps that rode in a batch with at least one other)."""
        return self.tracker.stats

    @property
    def table(self) -> str:
        return self.tracker.table

    def waiting(self, tag: str) -> int:
        """How many stamps on ``tag`` are queued for the next write (those of the write
        in flight excluded)."""
        with self._lock:
            queue = self._queues.get(tag)
            return 0 if queue is None else len(queue.waiting)

    # -- combined -------------------------------------------------------------------

    def stamp(self, tag: str, stamp: bytes | bytearray | memoryview, *, op_id: str | None = None) -> Stamp:
        """XOR ``stamp`` into the chain, sharing the write with concurrent stamps on the
        same tag. Returns the value after this stamp, in queue order. Raises what
        ``XorAckDynamoDB.stamp`` raises; bad input (tag, stamp, op id) is rejected
        before queueing."""
        tag = check_tag(tag)
        delta = as_bytes(stamp, tag=tag)
        if not any(delta):
            raise ZeroBufferNoOp("stamping with an all-zero stamp changes nothing", tag=tag)
        op = op_key(op_id) if op_id is not None else random_op_key()
        mine = _Pending(delta, op)
        with self._lock:
            queue = self._queues.setdefault(tag, _Queue())
            queue.waiting.append(mine)
            if not queue.busy:
                queue.busy = True
                mine.lead = True
        if not mine.lead:
            try:
                mine.wake.wait()  # settled by a leader, or handed the tag
            except BaseException:  # KeyboardInterrupt while queued
                self._abandon(tag, mine)
                raise
        if not mine.settled:
            self._lead(tag)
        if mine.error is not None:
            raise mine.error
        assert mine.result is not None
        return mine.result

    def _abandon(self, tag: str, mine: _Pending) -> None:
        """Take an interrupted caller's stamp out of the queue if no write has taken it
        yet, and pass the tag on if it had just been handed to this caller, so that the
        callers queued behind it are not left without a leader."""
        with self._lock:
            queue = self._queues.get(tag)
            if queue is None or mine not in queue.waiting:
                return  # in a batch already: that write goes ahead without this caller
            queue.waiting.remove(mine)
            if mine.lead:
                self._hand_on(tag, queue)

    def _hand_on(self, tag: str, queue: _Queue) -> None:
        """Wake the first queued caller to write the next batch, or free the tag.
        Called with the lock held."""
        if queue.waiting:
            successor = queue.waiting[0]
            successor.lead = True
            successor.wake.set()
        else:
            queue.busy = False
            del self._queues[tag]

    def _lead(self, tag: str) -> None:
        """Write every stamp queued on ``tag`` as one batch, then hand the tag to the
        first caller that queued meanwhile (so this caller returns without waiting for
        later batches)."""
        with self._lock:
            queue = self._queues[tag]
            batch, queue.waiting = queue.waiting, []
        try:
            self._commit(tag, batch)
        except BaseException as exc:
            # The write failed (TagNotFound, StaleLocalData, a transient error that
            # outlasted the budget): every caller in the batch gets the error; this
            # caller raises the original.
            for pending in batch:
                if not pending.settled:
                    pending.settle(_own(exc))
            raise
        finally:
            with self._lock:
                self._hand_on(tag, queue)

    def _commit(self, tag: str, batch: list[_Pending]) -> None:
        tracker = self.tracker
        if len(batch) > 1:
            tracker.stats.add("combined", len(batch))
        # The chain to write on, and whether it is fresh (a read, or the item a failed
        # condition returned) rather than this tracker's possibly stale last write.
        known: list[tuple[Chain | None, bool]] = [(tracker._cache.get(tag), False)]

        def attempt() -> _Plan:
            now = tracker._now()
            chain, fresh = known[0]
            if chain is not None and not fresh and self._objection(chain, batch, now):
                chain = None  # only a fresh read may decide against writing
            if chain is None:
                chain = tracker._read(tag)
            plan = self._plan(chain, batch, now)
            if plan.new is None:
                return plan
            try:
                if plan.delete:
                    tracker._write_delete(chain, now)
                    tracker._cache.discard(tag)
                else:
                    tracker._cache.put(tag, tracker._write_stamp(chain, plan.new, plan.ops, now))
            except ClientError as exc:
                if _error_code(exc) != "ConditionalCheckFailedException":
                    known[0] = (None, False)  # the outcome is unknown: start from a fresh read
                    raise
                current = tracker._old_item(exc, tag)
                if current is None:
                    if plan.delete and _retry_attempts(cast("dict[str, Any]", exc.response)) > 0:
                        return plan  # our completing delete landed; botocore's resend found nothing
                    raise TagNotFound(f"chain {tag!r} does not exist", tag=tag) from None
                written = (chain.version + 1, bytes(plan.new), plan.ops)
                if (current.version, current.stamp, current.ops) == written:
                    # Our write landed and its response was lost; botocore's resend then
                    # failed the condition. The op keys are random, so this is our write.
                    tracker._cache.put(tag, current)
                    return plan
                tracker._cache.put(tag, current)
                settled = self._plan(current, batch, tracker._now())
                if settled.new is None:  # nothing left to write (all duplicates, or the chain ended)
                    return settled
                known[0] = (current, True)
                tracker.stats.add("conflicts")
                raise _Conflict(current) from None
            return plan

        plan: _Plan = tracker._retrying(tag, attempt)
        if plan.new is not None:
            tracker.stats.add("batches")
            log.debug("stamp %s: %d stamps in one write", tag, len(batch))
        if plan.duplicates:
            tracker.stats.add("duplicates", plan.duplicates)
        for pending, outcome in zip(batch, plan.outcomes, strict=True):
            pending.settle(outcome)

    def _objection(self, chain: Chain, batch: list[_Pending], now: int) -> bool:
        """True when the last known ``chain`` gives any reason not to write the batch."""
        if chain.effective_state(now) != "pending":
            return True
        return any(p.op in chain.ops or len(p.delta) != len(chain.stamp) for p in batch)

    def _plan(self, chain: Chain, batch: list[_Pending], now: int) -> _Plan:
        """Replay ``batch`` on ``chain`` in order, exactly as one ``stamp()`` after
        another would decide each (see ``XorAckDynamoDB._judge``)."""
        tracker = self.tracker
        plan = _Plan()
        current: Chain | None = chain
        value, ops, applied = chain.stamp, chain.ops, False
        for pending in batch:
            if current is None:  # the batch completed the chain and it is deleted on ack
                plan.outcomes.append(TagNotFound(f"chain {chain.tag!r} does not exist", tag=chain.tag))
                continue
            if pending.op in ops:
                plan.duplicates += 1
                plan.outcomes.append(Stamp(value))
                continue
            try:
                tracker._raise_for_state(current, now)
            except XorAckError as exc:
                plan.outcomes.append(exc)
                continue
            if len(pending.delta) != len(value):
                plan.outcomes.append(
                    BufferLengthsUnequal(
                        f"stamp is {len(pending.delta)} bytes but chain {chain.tag!r} holds {len(value)}",
                        tag=chain.tag,
                    )
                )
                continue
            new = xor_all((value, pending.delta))
            value, ops, applied = bytes(new), (ops + (pending.op,))[-tracker.max_ops :], True
            plan.outcomes.append(new)
            if new.acked:
                if tracker.delete_on_ack:
                    current = None
                    plan.delete = True
                else:
                    current = replace(current, state="acked", stamp=value, ops=ops)
        if applied:
            plan.new, plan.ops = Stamp(value), ops
        return plan

    # -- delegated --------------------------------------------------------------------

    def create_table(self, *, wait: bool = True) -> bool:
        """See :meth:`XorAckDynamoDB.create_table`."""
        return self.tracker.create_table(wait=wait)

    def create(self, tag: str, stamp: bytes | bytearray | memoryview, *, op_id: str | None = None) -> Stamp:
        """See :meth:`XorAckDynamoDB.create`."""
        return self.tracker.create(tag, stamp, op_id=op_id)

    def fail(self, tag: str, reason: str | None = None) -> ChainStatus:
        """See :meth:`XorAckDynamoDB.fail`."""
        return self.tracker.fail(tag, reason)

    def touch(self, tag: str, ttl: timedelta | float | None = None) -> ChainStatus:
        """See :meth:`XorAckDynamoDB.touch`."""
        return self.tracker.touch(tag, ttl)

    def status(self, tag: str) -> ChainStatus:
        """See :meth:`XorAckDynamoDB.status`."""
        return self.tracker.status(tag)

    def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """See :meth:`XorAckDynamoDB.status_many`."""
        return self.tracker.status_many(tags)

    def delete(self, tag: str) -> None:
        """See :meth:`XorAckDynamoDB.delete`."""
        self.tracker.delete(tag)


def _own(exc: BaseException) -> BaseException:
    """A copy of ``exc`` for one caller: one exception object raised in several threads
    would collect all their tracebacks."""
    try:
        mine = copy.copy(exc)
    except (TypeError, ValueError, copy.Error):  # an exception type that cannot be copied: share it
        return exc
    mine.__cause__, mine.__context__ = exc.__cause__, exc.__context__
    return mine
