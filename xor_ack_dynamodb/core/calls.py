"""The tracker operations as sans-IO state machines (the stamps: :mod:`.stamping`).

A call's :meth:`Call.round` is a generator: it yields the requests of :mod:`.messages`,
is sent the store's replies, and returns the call's result or raises its error. A round
that raises :class:`Again` lost a race; a store failure is thrown into it as
:class:`Transient`; either way the driver runs another round after a backoff, and the
call object keeps what it learned. The hard cases: docs/concepts.md, "Concurrency".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

from ..errors import StaleLocalData, TagNotFound, XorAckError
from ..stamps import Position, Stamp, Sum, result
from ..status import ChainStatus
from .algebra import Value
from .chain import Chain, Op
from .messages import (
    Add,
    Extend,
    MarkFailed,
    Put,
    Read,
    Rejected,
    Remove,
    RemoveAny,
    Request,
    Written,
    judged_at,
)
from .rules import ChainRules, not_found
from .verdicts import DEFERRED, Duplicate, Reject, StampPlan, Unchanged, Verdict

log = logging.getLogger("xor_ack_dynamodb")

T = TypeVar("T")
#: One round of a call: yields requests, is sent replies, returns the result.
Round = Generator[Request, Any, T]
#: A rules' judgement of a refused fail or touch: (tag, chain, owner, now).
Judge = Callable[[str, Chain | None, str | None, int], Verdict]


class Again(Exception):
    """The round lost an optimistic-concurrency race: run another after a backoff."""


class Transient(Exception):
    """A store failure after which a request may or may not have been applied
    (throttling, a 5xx, a lost connection). ``error`` is the store's own exception."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


class Step(Generic[T]):
    """One round of a call, stepped by a driver: send :attr:`request`, hand back its
    :meth:`reply` or error (:meth:`failed`), until :attr:`done`; then :attr:`result`.
    The round's own errors propagate from :meth:`reply` / :meth:`failed`."""

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
    """State shared by every call: the tag, the chain last seen (``known``), whether an
    earlier write's outcome is ``unknown``, and counters for the tracker's stats."""

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
        """Yield ``request`` and return the reply, noting an unknown outcome for a write."""
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

    def _after(self, reply: Written) -> Chain:
        """The chain a write left; :class:`TagNotFound` when it was deleted since."""
        if reply.chain is None:
            raise self._not_found()
        self._saw(reply.chain)
        return reply.chain

    def _outcome(
        self, reply: Written | Rejected, now: int, owner: str | None, judge: Judge
    ) -> tuple[ChainStatus, bool]:
        """A fail's or touch's status, and whether its write landed; a refused write is
        judged at the time its condition was tested (:class:`Again`: a lost race)."""
        if isinstance(reply, Written):
            return self.rules.status(self._after(reply), now), True
        now = judged_at(reply, now)  # the deadline test's time, if later than the round's
        self._saw(reply.current)
        verdict = judge(self.tag, reply.current, owner, now)
        if isinstance(verdict, Unchanged):
            assert reply.current is not None
            return self.rules.status(reply.current, now), False
        if isinstance(verdict, Reject):
            raise verdict.error
        self.events["conflicts"] += 1
        raise Again

    def _not_found(self) -> TagNotFound:
        self.gone = True
        return not_found(self.tag)

    def exhausted(self, attempts: int) -> XorAckError:
        """The error for a retry budget spent on lost races."""
        return StaleLocalData(
            f"chain {self.tag!r} kept changing: {attempts} attempts lost the race", tag=self.tag
        )


class CreateCall(Call[Stamp | Sum]):
    """``create()``: a blind conditional Put; on a chain already there, the rules
    decide, and an overwrite is a Put conditioned on the chain it replaces."""

    def __init__(
        self,
        rules: ChainRules,
        tag: str,
        value: Value,
        op: Op,
        owner: str | None,
        replace_expired: bool = True,
    ) -> None:
        super().__init__(rules, tag)
        self.value, self.op, self.owner = value, op, owner
        self.replace_expired = replace_expired

    def round(self, now: int) -> Round[Stamp | Sum]:
        chain = self.known
        while True:
            if chain is not None:
                verdict = self.rules.judge_create(chain, self.op, now, self.replace_expired)
                if isinstance(verdict, Duplicate):
                    self.events["duplicates"] += 1
                    return verdict.result
                if isinstance(verdict, Reject):
                    raise verdict.error
            new = self.rules.new_chain(self.tag, self.value, self.op, self.owner, now, old=chain)
            reply = yield from self._io(Put(new, chain))
            if isinstance(reply, Written):
                self._saw(new)
                return result(self.value, acked=False, position=Position(new.position.lineage, 0))
            self._saw(reply.current)
            # A blind Put that found a chain judges it now; anything else lost a race
            # (the chain changed, or was deleted since the condition was checked).
            if chain is not None or reply.current is None:
                self.events["conflicts"] += 1
                raise Again
            chain = reply.current


def remove_tombstone(call: Call[Any], chain: Chain) -> Generator[Request, Any, None]:
    """``delete_on_ack``: delete the acked tombstone just written (best effort: one left
    behind is purged by TTL)."""
    try:
        reply = yield Remove(chain)
    except Transient:
        call.events["deletes_lost"] += 1
        return
    if isinstance(reply, Written):
        call.known, call.gone = None, True


class FailCall(Call[tuple[ChainStatus, bool]]):
    """``fail()``: one conditional write. Returns the status and whether this call
    failed the chain."""

    def __init__(self, rules: ChainRules, tag: str, reason: str | None, owner: str | None) -> None:
        super().__init__(rules, tag)
        self.reason, self.owner = reason, owner

    def round(self, now: int) -> Round[tuple[ChainStatus, bool]]:
        reply = yield from self._io(MarkFailed(self.tag, self.reason, self.owner, now))
        return self._outcome(reply, now, self.owner, self.rules.judge_fail)


class TouchCall(Call[ChainStatus]):
    """``touch()``: one conditional write extending a pending chain's deadline."""

    def __init__(self, rules: ChainRules, tag: str, ttl: int | None, owner: str | None) -> None:
        super().__init__(rules, tag)
        self.ttl, self.owner = ttl, owner

    def round(self, now: int) -> Round[ChainStatus]:
        reply = yield from self._io(Extend(self.tag, self.ttl, self.owner, now))
        return self._outcome(reply, now, self.owner, self.rules.judge_touch)[0]


class StatusCall(Call[ChainStatus]):
    """``status()``: one strongly consistent read."""

    def round(self, now: int) -> Round[ChainStatus]:
        chain = yield from self._read()
        if chain is None:
            raise self._not_found()
        return self.rules.status(chain, now)


class DeleteCall(Call[None]):
    """``delete()``: an unconditional delete. Finding nothing is :class:`TagNotFound`,
    unless an earlier copy of the request may be the one that deleted it."""

    def round(self, now: int) -> Round[None]:
        reply = yield from self._io(RemoveAny(self.tag))
        self.known, self.gone = None, True
        if isinstance(reply, Written) and reply.chain is None and not self.unknown:
            raise self._not_found()
        return None


def first_outcome(plan: StampPlan) -> Stamp | Sum:
    """A single stamp's result from its plan (raising its error)."""
    outcome = plan.outcomes[0]
    if isinstance(outcome, XorAckError):
        raise outcome
    assert outcome is not DEFERRED and isinstance(outcome, (Stamp, Sum))
    return outcome
