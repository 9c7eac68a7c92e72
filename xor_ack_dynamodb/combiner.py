"""Group commit for hot chains: concurrent stamps on one tag share one conditional write.

In xor mode, N threads stamping one chain race: every write is conditional on the value
its writer last saw, so all but one lose and try again, and a busy chain costs several
requests per stamp. :class:`CombiningTracker` queues the stamps a process makes on a tag
while a write for that tag is in flight; the next write carries them all. One leader at
a time writes for a tag; every other caller waits for its own outcome.

It works on the public surface of a tracker only: its driver runs a
:class:`~xor_ack_dynamodb.core.calls.StampCall` holding several stamps, and the chain
rules (:meth:`ChainRules.plan`) decide each one's outcome exactly as one ``stamp()``
after another would. In sum mode there is nothing to combine (a stamp never loses a
race), so stamps pass straight through.
"""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from .config import AckConfig
from .core.rules import BATCH_CAP
from .core.stamping import StampCall
from .core.verdicts import DEFERRED, StampItem
from .drivers import SyncTracker
from .errors import OutcomeUnknown, XorAckError
from .stamps import Stamp, Sum
from .stores.dynamodb.tracker import XorAckDynamoDB

__all__ = ["CombiningTracker"]

log = logging.getLogger("xor_ack_dynamodb")


@dataclass(eq=False)
class _Pending:
    """One caller's stamp waiting in a tag's queue, and later its outcome."""

    item: StampItem
    wake: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # this caller writes the next batch for the tag
    settled: bool = False
    result: Stamp | Sum | None = None
    error: BaseException | None = None

    def settle(self, outcome: Stamp | Sum | BaseException) -> None:
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


class CombiningTracker(SyncTracker):
    """A tracker whose ``stamp()`` combines the concurrent xor-mode stamps of this
    process on one tag into one conditional write. Every other method is
    :class:`SyncTracker`'s on the wrapped tracker's driver, with its hooks (``MemoryAck``'s
    callbacks). Share one per process (it is thread-safe). Its ``stats`` are the wrapped
    tracker's counters, plus ``batches`` (combined writes made) and ``combined`` (stamps
    that rode in a batch with at least one other).

    Guarantees of :meth:`stamp`, beyond those of the wrapped tracker's:

    * The stamps merged into one write are applied as if ``stamp()`` had been called
      for each, in the order they queued: each caller gets the value after its own
      stamp (so exactly one caller of a completing batch sees ``acked``), a duplicate op
      id returns the value at its turn, a stamp queued after the chain reached zero gets
      :class:`TagAcked`, a stamp of the wrong length gets its own
      :class:`BufferLengthsUnequal`, a failed or expired chain fails every caller.
    * One write carries at most 39 stamps and a batch marker (a random op) ahead of
      them: a leader that lost the response of its write finds the marker in the
      chain (its item, or its history) and knows the whole batch landed, however many
      ops it held; stamps that do not fit wait for the next write.
    * Each stamp's ``op_id`` and ``after`` mean what they mean
      for ``stamp()``: a stamp whose duplicate check needs the chain's history has it
      read before the write that carries it.
    * If the write cannot be made (``TagNotFound``, ``StaleLocalData``, a transient
      error that outlasted the budget), every caller in the batch gets that error, and
      nothing of the batch was applied unless a transient error hid the outcome:
      calling again with the same ``op_id`` tells.
    * Bad input is rejected before the stamp queues. Every caller is always settled:
      an error is handed to each waiter (as its own copy, or shared when it cannot be
      copied), and a waiter that hears nothing for twice the retry budget raises
      :class:`OutcomeUnknown` instead of waiting forever.
    * A caller interrupted while queued (``KeyboardInterrupt``) is taken out of the
      queue if no write has taken its stamp yet.
    """

    def __init__(self, tracker: SyncTracker) -> None:
        if not isinstance(tracker, SyncTracker):
            raise TypeError(f"CombiningTracker wraps a tracker, got {type(tracker).__name__}")
        self.tracker = tracker
        self.driver, self.calls = tracker.driver, tracker.calls
        self._lock = threading.Lock()
        self._queues: dict[str, _Queue] = {}
        # A waiter hearing nothing for this long gives up (the leader's call itself is
        # bounded by the retry budget).
        self._patience = 2 * tracker.driver.retry.max_seconds + 30

    @classmethod
    def from_config(cls, config: AckConfig, client: Any = None) -> CombiningTracker:
        """A combining tracker around ``XorAckDynamoDB.from_config(config, client)``."""
        return cls(XorAckDynamoDB.from_config(config, client))

    def __repr__(self) -> str:
        return f"CombiningTracker({self.tracker!r})"

    def waiting(self, tag: str) -> int:
        """How many stamps on ``tag`` are queued for the next write (those of the write
        in flight excluded)."""
        with self._lock:
            queue = self._queues.get(tag)
            return 0 if queue is None else len(queue.waiting)

    # -- combined -------------------------------------------------------------------

    def _run_stamp(self, call: StampCall) -> Stamp | Sum:
        """Queue the stamp (:meth:`stamp`, checked) on its tag and wait for its outcome,
        in queue order, from the write that carries it (this caller's own as the tag's
        leader, or another caller's)."""
        mine = _Pending(call.stamps[0])
        with self._lock:
            queue = self._queues.setdefault(call.tag, _Queue())
            queue.waiting.append(mine)
            if not queue.busy:
                queue.busy = True
                mine.lead = True
        while not mine.settled:
            if not mine.lead:
                try:
                    heard = mine.wake.wait(self._patience)  # settled by a leader, or handed the tag
                except BaseException:  # KeyboardInterrupt while queued
                    self._abandon(call.tag, mine)
                    raise
                if not heard:
                    self._abandon(call.tag, mine)
                    raise OutcomeUnknown(
                        f"chain {call.tag!r}: the combined write carrying this stamp did not report "
                        f"within {self._patience:.0f} s; call again with the same op_id to find out",
                        tag=call.tag,
                    )
                mine.wake.clear()
            if not mine.settled and mine.lead:
                self._lead(call.tag)
        if mine.error is not None:
            raise mine.error
        assert mine.result is not None
        return mine.result

    def _abandon(self, tag: str, mine: _Pending) -> None:
        """Take a caller's stamp out of the queue if no write has taken it yet, and pass
        the tag on if it had just been handed to this caller."""
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
        """Write the stamps queued on ``tag`` (up to a window's worth) as one batch; put
        any the chain's window could not take back at the head of the queue; hand the
        tag to the first caller still queued."""
        cap = BATCH_CAP
        with self._lock:
            queue = self._queues[tag]
            batch, queue.waiting = queue.waiting[:cap], queue.waiting[cap:]
        deferred: list[_Pending] = []
        try:
            deferred = self._commit(tag, batch)
        except BaseException as exc:
            # The write failed as a whole (TagNotFound, StaleLocalData, a transient error
            # past the budget): every caller gets the error; this one raises the original.
            for pending in batch:
                if not pending.settled:
                    pending.settle(_own(exc))
            raise
        finally:
            with self._lock:
                for pending in deferred:
                    pending.lead = False
                queue.waiting[:0] = deferred
                self._hand_on(tag, queue)

    def _commit(self, tag: str, batch: list[_Pending]) -> list[_Pending]:
        driver = self.driver
        if len(batch) > 1:
            driver.stats.add("combined", len(batch))
        call = StampCall(driver.rules, tag, [p.item for p in batch], driver.cache.get(tag), driver.history)
        plan = driver.run(call)
        if plan.new is not None:
            driver.stats.add("batches")
            log.debug("stamp %s: %d stamps in one write", tag, len(batch))
        deferred = []
        for pending, outcome in zip(batch, plan.outcomes, strict=True):
            if outcome is DEFERRED:
                deferred.append(pending)
            else:
                assert isinstance(outcome, (Stamp, Sum, XorAckError))
                pending.settle(outcome)
        return deferred

    # -- the wrapped tracker's hooks ------------------------------------------------------

    def stamped(self, tag: str, result: Stamp | Sum) -> None:
        self.tracker.stamped(tag, result)

    def timed_out(self, tag: str) -> bool:
        return self.tracker.timed_out(tag)

    def failed(self, tag: str, reason: str | None) -> None:
        self.tracker.failed(tag, reason)


def _own(exc: BaseException) -> BaseException:
    """A copy of ``exc`` for one caller (one exception object raised in several threads
    would collect all their tracebacks), or ``exc`` itself if it cannot be copied."""
    try:
        mine = copy.copy(exc)
        mine.__cause__, mine.__context__ = exc.__cause__, exc.__context__
    except Exception:  # any failure to copy: share the original rather than strand a waiter
        return exc
    return mine
