"""The tracker operations as sans-IO state machines.

Each call is an object whose :meth:`Call.round` is a generator: it yields the requests
of :mod:`.messages`, receives the store's replies, and returns the call's result, or
raises its error. A driver (:mod:`xor_ack_dynamodb.drivers`, in threads or in an event
loop) steps rounds with :class:`Step`: a round that raises :class:`Again` lost a race
and runs again after a backoff; a store failure is thrown into the round as
:class:`Transient`, after which the round ends and runs again. The call object keeps
what it learned between rounds (the chain it last saw, whether an earlier write's
outcome is unknown), so no decision is ever made twice in two places.

The hard cases, as timelines (A and B are writers, T the table):

Lost response, xor mode::

    A: read v1 ──Put(v2 | token t1)──> T applies, response lost
    A: (botocore resends) ──Put(v2 | t1)──> T: token is t2 now, rejected, returns v2
    A: v2 holds A's op ──> duplicate: A returns v2, applied once

ABA, xor mode (why writes are conditioned on a random token, not on the value)::

    A: read (v=X, ops=[..]) ... stalls
    B: stamp X^Y, then stamp Y: v is X again, ops=[.., b1, b2]
    A: Put(v=X^Z, ops=[.., a]) conditioned on v=X would pass and drop b1, b2 from the
       op list; conditioned on token it is rejected, A re-reads and retries.

History reset under an unknown outcome (foreign writer)::

    A: Put(v2, ops+[a]) ──> applied, response lost (a transient error)
    N: (Node package) PutItem {tag, stamp}: token, ops, seq dropped
    A: re-reads: no token, a not in ops: A cannot tell whether its stamp landed
       ──> OutcomeUnknown, nothing written (applying again might apply it twice)

Sum mode, exactly one ``acked``::

    A: ADD -e1 (sum 5 -> e2) ......... returns e2
    B: ADD -e2 (sum e2 -> 0) ......... returns 0: B completed it, B writes state=acked
    C: ADD -e3 (condition sum <> 0 fails) ──> TagAcked
    B': B's message redelivered: op in ops, sum 0 and B's op is the last one: acked,
        duplicate (the same op, so still one logical completion)
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

from ..errors import OutcomeUnknown, StaleLocalData, TagNotFound, XorAckError
from ..stamps import Stamp, Sum
from ..status import ChainStatus
from .algebra import Value, wrap
from .chain import Chain, Op, random_op
from .messages import Add, Extend, MarkFailed, Put, Read, Rejected, Remove, RemoveAny, Request, Trim, Written
from .rules import DEFERRED, ChainRules, Duplicate, Plan, Reject, Unchanged

__all__ = [
    "Again",
    "Transient",
    "Call",
    "CreateCall",
    "StampCall",
    "AddCall",
    "FailCall",
    "TouchCall",
    "StatusCall",
    "DeleteCall",
    "Round",
    "Step",
]

log = logging.getLogger("xor_ack_dynamodb")

T = TypeVar("T")
#: One round of a call: yields requests, is sent replies, returns the result.
Round = Generator[Request, Any, T]


class Again(Exception):
    """The round lost an optimistic-concurrency race: run another after a backoff."""


class Transient(Exception):
    """A store failure after which a request may or may not have been applied
    (throttling, a 5xx, a lost connection). ``error`` is the store's own exception."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


class Step(Generic[T]):
    """One round of a call, stepped by a driver: send :attr:`request` to the store, then
    hand back its :meth:`reply` or the exception it raised (:meth:`failed`), until
    :attr:`done`; then :attr:`result` is the round's result. The round's own errors
    (:class:`Again`, :class:`Transient`, the call's typed errors) propagate from
    :meth:`reply` / :meth:`failed`. The step never waits: the driver does."""

    def __init__(self, round_: Round[T], is_transient: Callable[[BaseException], bool]) -> None:
        self._round = round_
        self._is_transient = is_transient
        self.done = False
        self.request: Request  # set by the first step unless the round ends at once
        self.result: T
        self._advance(None, None)

    def reply(self, reply: Any) -> None:
        self._advance(reply, None)

    def failed(self, error: Exception) -> None:
        """The store raised ``error``: thrown into the round as :class:`Transient` when
        it is one or the store calls it transient, as itself otherwise."""
        if not isinstance(error, Transient) and self._is_transient(error):
            error = Transient(error)
        self._advance(None, error)

    def _advance(self, reply: Any, error: BaseException | None) -> None:
        try:
            self.request = self._round.throw(error) if error is not None else self._round.send(reply)
        except StopIteration as stop:
            self.done, self.result = True, stop.value


_WRITES = (Put, Remove, RemoveAny, Add, Extend, MarkFailed)


class Call(Generic[T]):
    """State shared by every call: the tag, the chain last seen (``known``, which the
    driver caches), whether that value is a fresh read, and counters for the tracker's
    stats (``conflicts``, ``duplicates``, ``trims``...)."""

    def __init__(self, rules: ChainRules, tag: str, known: Chain | None = None) -> None:
        self.rules = rules
        self.tag = tag
        self.known = known
        self.fresh = False
        self.gone = False  # the chain was found missing: the driver forgets it
        self.unknown = False  # an earlier write's outcome is unknown
        self.events: Counter[str] = Counter()

    def round(self, now: int) -> Round[T]:
        raise NotImplementedError

    def _io(self, request: Request) -> Generator[Request, Any, Any]:
        """Yield ``request`` and return the reply, noting an unknown outcome for a write
        that failed transiently or was resent."""
        try:
            reply = yield request
        except Transient:
            if isinstance(request, _WRITES):
                self.unknown = True
            raise
        if isinstance(reply, (Written, Rejected)) and reply.resent and isinstance(request, _WRITES):
            self.unknown = True
        return reply

    def _read(self) -> Generator[Request, Any, Chain | None]:
        chain = yield from self._io(Read(self.tag))
        self._saw(chain)
        return chain  # type: ignore[no-any-return]

    def _saw(self, chain: Chain | None) -> None:
        self.known, self.fresh, self.gone = chain, True, chain is None

    def _not_found(self) -> TagNotFound:
        self.gone = True
        return TagNotFound(f"chain {self.tag!r} does not exist", tag=self.tag)

    def exhausted(self, attempts: int) -> XorAckError:
        """The error for a retry budget spent on lost races."""
        return StaleLocalData(
            f"chain {self.tag!r} kept changing: {attempts} attempts lost the race", tag=self.tag
        )


class CreateCall(Call[Stamp | Sum]):
    """``create()``: a blind conditional Put (one request on the happy path); on a
    chain already there, the rules decide duplicate / overwrite / TagExists, and an
    overwrite is a Put conditioned on the chain it replaces."""

    def __init__(self, rules: ChainRules, tag: str, value: Value, op: Op, owner: str | None) -> None:
        super().__init__(rules, tag)
        self.value, self.op, self.owner = value, op, owner

    def round(self, now: int) -> Round[Stamp | Sum]:
        chain = self.known
        if chain is None:
            new = self.rules.new_chain(self.tag, self.value, self.op, self.owner, now)
            reply = yield from self._io(Put(new, None))
            if isinstance(reply, Written):
                self._saw(new)
                return wrap(self.value, acked=False)
            chain = reply.current
            self._saw(chain)
            if chain is None:  # deleted since the condition was checked
                self.events["conflicts"] += 1
                raise Again
        verdict = self.rules.judge_create(chain, self.op, now)
        if isinstance(verdict, Duplicate):
            self.events["duplicates"] += 1
            return verdict.result
        if isinstance(verdict, Reject):
            raise verdict.error
        new = self.rules.new_chain(self.tag, self.value, self.op, self.owner, now, old=chain)
        reply = yield from self._io(Put(new, chain))
        if isinstance(reply, Written):
            self._saw(new)
            return wrap(self.value, acked=False)
        self._saw(reply.current)
        self.events["conflicts"] += 1
        raise Again


class StampCall(Call[Plan]):
    """An xor-mode stamp, or several combined into one write (``CombiningTracker``):
    read (or take the last known value), plan with the rules, write conditioned on the
    chain's token. Returns the :class:`Plan`, whose outcomes are in the stamps' order.

    A last known value may be stale: it is only ever used to decide to *write* (the
    token condition rejects a stale base); deciding not to write (duplicate, refusal)
    takes a fresh read. After a write whose outcome is unknown, the next round reads,
    looks for the write's marker (a combined write) or op (a single stamp), and refuses
    with :class:`OutcomeUnknown` if the chain's history no longer tells (see the module
    doc).
    """

    def __init__(
        self,
        rules: ChainRules,
        tag: str,
        stamps: list[tuple[Value, Op, str | None]],
        known: Chain | None = None,
    ) -> None:
        super().__init__(rules, tag, known)
        self.stamps = stamps
        self.combined = len(stamps) > 1
        self.sent: dict[bytes, Plan] = {}  # marker key -> the plan that write carried
        self.base: Chain | None = None  # what the write with an unknown outcome was based on

    def round(self, now: int) -> Round[Plan]:
        chain, fresh = self.known, self.fresh
        if chain is None or self.unknown:
            chain, fresh = (yield from self._read()), True
        while True:
            if chain is None:
                raise self._not_found()
            landed = self._landed(chain)
            if landed is not None:
                yield from self._finish_tombstone(chain)
                return landed
            marker = random_op() if self.combined else None
            plan = self.rules.plan(chain, self.stamps, now, marker)
            if fresh or (
                plan.new is not None
                and plan.duplicates == 0
                and all(isinstance(o, (Stamp, Sum)) for o in plan.outcomes)
            ):
                break
            chain, fresh = (yield from self._read()), True  # only a fresh read may decide not to write
        if plan.new is None:
            self.events["duplicates"] += plan.duplicates
            yield from self._finish_tombstone(chain)
            return plan
        if self.unknown:
            self._check_history(chain)
        if marker is not None:
            self.sent[marker.key] = plan
        if not self.unknown:
            self.base = chain
        reply = yield from self._io(Put(plan.new, chain))
        if isinstance(reply, Written):
            self.known, self.fresh = plan.new, False
            self.events["duplicates"] += plan.duplicates
            if plan.new.state == "acked" and self.rules.delete_on_ack:
                yield from _remove_tombstone(self, plan.new)
            return plan
        current = reply.current
        self._saw(current)
        if current is None:
            raise self._not_found()
        landed = self._landed(current)
        if landed is not None:
            yield from self._finish_tombstone(current)
            return landed
        settled = self.rules.plan(current, self.stamps, now)
        if settled.new is None:  # nothing left to write: every stamp is a duplicate or refused
            if self.unknown and settled.duplicates < len(self.stamps):
                self._check_history(current)
            self.events["duplicates"] += settled.duplicates
            yield from self._finish_tombstone(current)
            return settled
        self.events["conflicts"] += 1
        raise Again

    def _finish_tombstone(self, chain: Chain) -> Generator[Request, Any, None]:
        """``delete_on_ack``: a duplicate of the completing stamp (ours, whose response
        was lost) finds the acked tombstone still there; delete it as the first attempt
        would have."""
        if self.rules.delete_on_ack and chain.state == "acked":
            yield from _remove_tombstone(self, chain)

    def _landed(self, chain: Chain) -> Plan | None:
        """The plan of an earlier combined write of this call found in ``chain``."""
        for key, plan in self.sent.items():
            if chain.find(key) is not None:
                self.events["duplicates"] += plan.duplicates
                return plan
        return None

    def _check_history(self, chain: Chain) -> None:
        """After a write with an unknown outcome: refuse to write again unless ``chain``
        would still show that write's ops had it landed."""
        base = self.base
        problem = None
        if chain.foreign and base is not None and base.foreign:
            # Both views are items without history: unchanged means our write did not
            # land (had it landed, the item would carry our token and history).
            if (chain.value, chain.version) != (base.value, base.version):
                problem = "the item (written by a writer without history, the Node package) changed"
        elif chain.foreign:
            problem = "a writer without history (the Node package) replaced the item"
        elif base is not None and base.create_op != chain.create_op:
            problem = "the chain was re-created"
        elif base is not None and base.seq < chain.seq - len(chain.ops):
            problem = f"more than {len(chain.ops)} ops landed since"
        if problem is not None:
            raise OutcomeUnknown(
                f"chain {self.tag!r}: a write's response was lost and {problem}, so whether "
                "it was applied cannot be told; nothing more was written",
                tag=self.tag,
            )


class AddCall(Call[Stamp | Sum]):
    """A sum-mode stamp: one conditional ``ADD`` that never loses a race. The writer
    whose ADD returns zero completed the chain and stores it as ``acked``; a writer
    whose append crossed the trim threshold trims the op list. A rejected ADD is judged
    on the chain the rejection returned."""

    def __init__(
        self, rules: ChainRules, tag: str, delta: Value, op: Op, owner: str | None, known: Chain | None = None
    ) -> None:
        super().__init__(rules, tag, known)
        self.delta, self.op, self.owner = delta, op, owner
        self.sent_at: int | None = None  # when the first copy whose outcome is unknown went out
        self.sent_seq: int | None = None  # and a lower bound of the chain's seq then

    def round(self, now: int) -> Round[Stamp | Sum]:
        # After a lost response the retry is only written if trims have not removed the
        # first copy's op, had it landed (then NOT contains(ops, :op) catches it): no
        # trim removed an op appended after the seq this writer last saw (exact), or,
        # with no such view, no trim ran since the copy was sent (minus the skew margin).
        since = after_seq = None
        if self.unknown:
            after_seq = self.sent_seq
            since = None if self.sent_at is None else self.sent_at - self.rules.skew
        else:
            self.sent_at, self.sent_seq = now, None if self.known is None else self.known.seq
        reply = yield from self._io(Add(self.tag, self.delta, self.op, self.owner, now, since, after_seq))
        if isinstance(reply, Written):
            after = reply.chain
            if after is None:  # read back after a transaction: deleted since
                raise self._not_found()
            self._saw(after)
            # A chain read back after the write may hold later ADDs too; none lands once
            # the sum is zero (the condition refuses it), so this write reached zero
            # exactly when its op is still the last one appended.
            last = not reply.later or (bool(after.ops) and after.ops[-1].key == self.op.key)
            if self.rules.algebra.is_zero(after.value) and last:
                yield from self._complete(after, now)
                return wrap(after.value, acked=True)
            count = self.rules.trim_count(after, 1)
            if count:
                yield from self._trim(after, count, now)
            return wrap(after.value, acked=False)
        current = reply.current
        self._saw(current)
        verdict = self.rules.judge_stamp(self.tag, current, self.delta, self.op, self.owner, now)
        if isinstance(verdict, Duplicate):
            self.events["duplicates"] += 1
            if verdict.result.acked and current is not None and current.state == "pending":
                yield from self._complete(current, now)  # our completion's state write was lost
            return verdict.result
        if isinstance(verdict, Reject):
            if current is None:
                self.gone = True
            raise verdict.error
        if not self.rules.uncut(current, since, after_seq):
            raise OutcomeUnknown(
                f"chain {self.tag!r}: a stamp's response was lost and the op list was trimmed "
                "since, so whether it was applied cannot be told; nothing more was written",
                tag=self.tag,
            )
        self.events["conflicts"] += 1
        raise Again

    def _complete(self, chain: Chain, now: int) -> Generator[Request, Any, None]:
        """Store the zero-sum chain as ``acked``. Reads decide ``acked`` from a zero sum
        anyway; this write makes the tombstone's retention start now."""
        done = self.rules.completed(chain, now)
        reply = yield from self._io(Put(done, chain))
        if isinstance(reply, Rejected):
            current = reply.current
            if (
                current is not None
                and current.state == "pending"
                and self.rules.algebra.is_zero(current.value)
            ):
                done = self.rules.completed(current, now)
                reply = yield from self._io(Put(done, current))  # a trim changed the token: once more
        if isinstance(reply, Written):
            self.known = done
            self.events["completions"] += 1
            if self.rules.delete_on_ack:
                yield from _remove_tombstone(self, done)

    def _trim(self, chain: Chain, count: int, now: int) -> Generator[Request, Any, None]:
        """Remove the ``count`` oldest ops. Housekeeping after a stamp that has been
        applied: whatever happens to the trim (refused because other trims already
        removed enough, lost, or failed outright), the stamp's outcome stands, and the
        next writer to cross a threshold trims what is left."""
        window = self.rules.window_of(chain)
        try:
            reply = yield Trim(self.tag, count, window, now)
        except Transient:
            self.events["trims_lost"] += 1
            return
        except Exception as exc:  # noqa: BLE001 - a failed trim must not fail the applied stamp
            log.warning("chain %r: trimming its op list failed: %r", self.tag, exc)
            self.events["trims_failed"] += 1
            return
        self.events["trims" if isinstance(reply, Written) else "trims_skipped"] += 1


def _remove_tombstone(call: Call[Any], chain: Chain) -> Generator[Request, Any, None]:
    """``delete_on_ack``: delete the acked tombstone just written. Best effort: if this
    fails, the tombstone stays until its retention ends (TTL), which is harmless."""
    try:
        reply = yield Remove(chain)
    except Transient:
        call.events["deletes_lost"] += 1
        return
    if isinstance(reply, Written):
        call.known, call.gone = None, True


class FailCall(Call[tuple[ChainStatus, bool]]):
    """``fail()``: one conditional write (no read). Returns the status and whether this
    call failed the chain (False when it had already failed)."""

    def __init__(self, rules: ChainRules, tag: str, reason: str | None, owner: str | None) -> None:
        super().__init__(rules, tag)
        self.reason, self.owner = reason, owner

    def round(self, now: int) -> Round[tuple[ChainStatus, bool]]:
        reply = yield from self._io(MarkFailed(self.tag, self.reason, self.owner, now))
        if isinstance(reply, Written):
            assert reply.chain is not None
            self._saw(reply.chain)
            return self.rules.status(reply.chain, now), True
        self._saw(reply.current)
        verdict = self.rules.judge_fail(self.tag, reply.current, self.owner, now)
        if isinstance(verdict, Unchanged):
            assert reply.current is not None
            return self.rules.status(reply.current, now), False
        if isinstance(verdict, Reject):
            raise verdict.error
        self.events["conflicts"] += 1
        raise Again


class TouchCall(Call[ChainStatus]):
    """``touch()``: one conditional write extending a pending chain's deadline."""

    def __init__(self, rules: ChainRules, tag: str, ttl: int | None, owner: str | None) -> None:
        super().__init__(rules, tag)
        self.ttl, self.owner = ttl, owner

    def round(self, now: int) -> Round[ChainStatus]:
        reply = yield from self._io(Extend(self.tag, self.ttl, self.owner, now))
        if isinstance(reply, Written):
            assert reply.chain is not None
            self._saw(reply.chain)
            return self.rules.status(reply.chain, now)
        self._saw(reply.current)
        verdict = self.rules.judge_touch(self.tag, reply.current, self.owner, now)
        if isinstance(verdict, Reject):
            raise verdict.error
        self.events["conflicts"] += 1
        raise Again


class StatusCall(Call[ChainStatus]):
    """``status()``: one strongly consistent read."""

    def round(self, now: int) -> Round[ChainStatus]:
        chain = yield from self._read()
        if chain is None:
            raise self._not_found()
        return self.rules.status(chain, now)


class DeleteCall(Call[None]):
    """``delete()``: an unconditional delete. Finding nothing is :class:`TagNotFound`,
    unless the request had been sent before (by botocore or an earlier round), since
    that earlier copy may be the one that deleted it."""

    def round(self, now: int) -> Round[None]:
        reply = yield from self._io(RemoveAny(self.tag))
        self.known, self.gone = None, True
        if isinstance(reply, Written) and reply.chain is None and not self.unknown:
            raise self._not_found()
        return None


def first_outcome(plan: Plan) -> Stamp | Sum:
    """A single stamp's result from its plan (raising its error)."""
    outcome = plan.outcomes[0]
    if isinstance(outcome, XorAckError):
        raise outcome
    assert outcome is not DEFERRED and isinstance(outcome, (Stamp, Sum))
    return outcome
