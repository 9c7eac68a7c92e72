"""The stamp calls: :class:`StampCall` (a read-modify-write: xor mode, combined stamps
and the batch calls) and :class:`AddCall` (sum mode's one blind ``ADD``). Both apply a
stamp at most once per op id for the chain's lineage; the timelines are in
docs/concepts.md, "Exactly once for a chain's whole life".
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any, TypeVar

from ..errors import OutcomeUnknown, TagFailed
from ..stamps import Position, Stamp, Sum, result
from .algebra import Value, is_negative, is_zero
from .batch import BATCH_SIZE, chunks
from .calls import Again, Call, Round, Transient, remove_tombstone
from .chain import BLOCK, Chain, Op, random_op
from .history import START, Block, BlockCache, Found, Lookup, Searched, Unknowable, check, due, responsible
from .messages import (
    Add,
    HistoryRead,
    MarkFailed,
    Put,
    ReadHistory,
    Rejected,
    Request,
    Trim,
    WriteHistory,
    Written,
    judged_at,
)
from .rules import ChainRules
from .verdicts import NEGATIVE, Duplicate, Reject, StampItem, StampPlan, Verdict

log = logging.getLogger("xor_ack_dynamodb")

#: Trims of its own block a block's owner sends while an earlier block is still in the
#: list (its owner's trim most likely landing meanwhile) before it moves that block
#: itself.
OWN_TRIMS = 2
#: Guarded writes one round makes before backing off (each after a history read that
#: the chain's moves outran).
PASSES = 8


T = TypeVar("T")


class _History(Call[T]):
    """History I/O shared by both stamp calls."""

    searched: Searched

    def _lookup(self, lookups: list[Lookup]) -> Generator[Request, Any, None]:
        """Read the blocks ``lookups`` name that this call has not read yet."""
        for lookup in lookups:
            for chunk in chunks(self.searched.unread(lookup), BATCH_SIZE):
                reply = yield ReadHistory(self.tag, lookup.lineage, tuple(chunk))
                assert isinstance(reply, HistoryRead)
                if reply.unprocessed:
                    self.events["conflicts"] += 1
                    raise Again  # the store did not get to some keys: back off, ask again
                self.searched.add(lookup.lineage, chunk, reply.blocks)
                self.events["history_reads"] += 1

    def _applied(self, chain: Chain, key: bytes, after: Position) -> Generator[Request, Any, bool]:
        """Whether the op ``key`` landed on ``chain`` after ``after``: in its window, or
        in its history. Raises :class:`OutcomeUnknown` where that is not kept."""
        found = check(chain, key, after, self.searched)
        if isinstance(found, Lookup):
            yield from self._lookup([found])
            found = check(chain, key, after, self.searched)
        if isinstance(found, Unknowable):
            raise OutcomeUnknown(
                f"chain {self.tag!r}: a write's response was lost and {found.why}, so whether it was "
                "applied cannot be told; nothing more was written",
                tag=self.tag,
            )
        return isinstance(found, Found)

    def _keep_window(self, chain: Chain) -> None:
        """Keep the history blocks whole in ``chain``'s window: a later check need not
        read them."""
        whole = due(chain, 0, chain.seq, most=len(chain.ops) // BLOCK)
        self._seen(chain.position.lineage, whole)

    def _write_history(self, chain: Chain, blocks: list[Block]) -> Generator[Request, Any, None]:
        lineage = chain.position.lineage
        reply = yield WriteHistory(self.tag, lineage, tuple(blocks), self.rules.history_purge(chain))
        assert isinstance(reply, Written)
        self.events["history_writes"] += 1
        self._seen(lineage, blocks)

    def _seen(self, lineage: bytes, blocks: list[Block]) -> None:
        self.searched.add(lineage, tuple(b.index for b in blocks), {b.index: b.ops for b in blocks})


class StampCall(_History[StampPlan]):
    """A read-modify-write conditioned on the chain's token, returning the
    :class:`StampPlan` (outcomes in the stamps' order). A last known value is only ever
    used to decide to *write*; deciding not to write takes a fresh read. After a write
    whose outcome is unknown, the next round looks for its marker or op since the chain
    it was based on, and raises :class:`OutcomeUnknown` only where that cannot tell.
    """

    def __init__(
        self,
        rules: ChainRules,
        tag: str,
        stamps: list[StampItem],
        known: Chain | None = None,
        history: BlockCache | None = None,
    ) -> None:
        super().__init__(rules, tag, known)
        self.stamps = stamps
        self.combined = len(stamps) > 1
        self.sent: dict[bytes, StampPlan] = {}  # marker key -> the plan that write carried
        self.base: Chain | None = None  # what the write with an unknown outcome was based on
        self.sent_at: Position | None = None  # where that write's ops would have landed after
        self.searched = Searched(history)
        # History blocks this call wrote: a block's content is fixed by its place, so an
        # attempt after a lost race need not write it again.
        self.moved: set[tuple[bytes, int]] = set()

    def round(self, now: int) -> Round[StampPlan]:
        chain, fresh = self.known, self.fresh
        if chain is None or self.unknown:
            chain, fresh = (yield from self._read()), True
        passes = 0
        while True:
            if chain is None:
                raise self._not_found()
            landed = yield from self._landed(chain)
            if landed is not None:
                return landed
            if self._unchanged_foreign(chain):
                self.unknown = False  # the item is as the lost write found it: it did not land
            marker = random_op() if self.combined else None
            plan = self.rules.plan(chain, self._items(chain), now, marker, self.searched)
            if plan.lookups:
                passes += 1
                if passes > PASSES:
                    raise Again
                yield from self._lookup(plan.lookups)
                continue
            if fresh or (
                plan.new is not None
                and plan.duplicates == 0
                and all(isinstance(o, (Stamp, Sum)) for o in plan.outcomes)
            ):
                break
            chain, fresh = (yield from self._read()), True  # only a fresh read may decide not to write
        if plan.new is None:
            return (yield from self._settled(plan, chain))
        lineage = plan.new.position.lineage
        unwritten = [b for b in plan.moved if (lineage, b.index) not in self.moved]
        if unwritten:
            yield from self._write_history(plan.new, unwritten)
            self.moved.update((lineage, b.index) for b in unwritten)
        if marker is not None:
            self.sent[marker.key] = plan
        if not self.unknown:
            self.base = chain
            self.sent_at = Position(lineage, chain.seq)
        reply = yield from self._io(Put(plan.new, chain, now))
        if isinstance(reply, Written):
            self.known, self.fresh = plan.new, False
            self.events["trims"] += len(plan.moved)
            return (yield from self._settled(plan, plan.new))
        current, now = reply.current, judged_at(reply, now)  # the deadline test's time, if later
        self._saw(current)
        if current is None:
            raise self._not_found()
        landed = yield from self._landed(current)
        if landed is not None:
            return landed
        settled = self.rules.plan(current, self._items(current), now, None, self.searched)
        if settled.new is None and not settled.lookups:  # every stamp is a duplicate or refused
            return (yield from self._settled(settled, current))
        self.events["conflicts"] += 1
        raise Again

    def _items(self, chain: Chain) -> list[StampItem]:
        """The stamps; after a lost single stamp, bounded by its own copy too."""
        if not self.unknown or self.combined:
            return self.stamps
        delta, op, owner, after = self.stamps[0]
        sent = self.sent_at
        if after is None or (sent is not None and sent.lineage != chain.position.lineage):
            after = sent or START  # only this call's own copy, or one on a lineage since replaced
        elif sent is not None and sent.lineage == after.lineage:
            after = Position(after.lineage, min(after.seq, sent.seq))
        return [(delta, op, owner, after)]

    def _unchanged_foreign(self, chain: Chain) -> bool:
        """After a lost write over a foreign item: it is exactly as that write found it,
        so the write did not land."""
        base = self.base
        return (
            self.unknown
            and base is not None
            and base.foreign
            and chain.foreign
            and (chain.value, chain.version) == (base.value, base.version)
        )

    def _landed(self, chain: Chain) -> Generator[Request, Any, StampPlan | None]:
        """The plan of an earlier combined write of this call found in ``chain`` (its
        window, or its history since the write's base), its tombstone finished."""
        for key, plan in self.sent.items():
            if chain.find(key) is not None or (
                self.sent_at is not None
                and not self._unchanged_foreign(chain)
                and (yield from self._applied(chain, key, self.sent_at))
            ):
                return (yield from self._settled(plan, chain))
        return None

    def _settled(self, plan: StampPlan, chain: Chain) -> Generator[Request, Any, StampPlan]:
        """``plan``, its duplicates counted; with ``delete_on_ack``, ``chain`` deleted if it
        is an ``acked`` tombstone (our write's, landed or lost)."""
        self.events["duplicates"] += plan.duplicates
        if self.rules.delete_on_ack and chain.state == "acked":
            yield from remove_tombstone(self, chain)
        return plan


class AddCall(_History[Stamp | Sum]):
    """A sum-mode stamp: one conditional ``ADD`` guarded by :attr:`after` (the op is
    known absent up to it). The writer whose ADD returns zero stores ``acked``; one that
    sees the chain pending below zero fails it (:data:`~.verdicts.NEGATIVE`), retried
    until it lands or the chain is found acked; the owner of a history block moves it.
    Once its op has landed (:attr:`landed`), a later round only finishes the completion
    or the fail-write and returns the op's own result, never a duplicate of itself."""

    def __init__(
        self,
        rules: ChainRules,
        tag: str,
        delta: Value,
        op: Op,
        owner: str | None,
        known: Chain | None = None,
        after: Position | None = None,
        history: BlockCache | None = None,
    ) -> None:
        super().__init__(rules, tag, known)
        self.delta, self.op, self.owner = delta, op, owner
        self.after = after
        self.sent = START if known is None else known.position  # the chain as seen when the ADD went out
        self.searched = Searched(history)
        self.failing = False  # our op landed on a chain below zero: fail it (every round)
        self.landed: Stamp | Sum | None = None  # our op's result, once it landed (or a copy's)

    def _io(self, request: Request) -> Generator[Request, Any, Any]:
        """As :meth:`Call._io`; once a drawn op's ADD has an unknown outcome, its copy
        may have landed after the chain as the call saw it when it went out: ``after``."""
        try:
            return (yield from super()._io(request))
        finally:
            if self.unknown and self.after is None:
                self.after = self.sent

    def _preread(self) -> Generator[Request, Any, None]:
        """Check the op against the chain as last seen (its history mostly in the
        tracker's cache), so that the ADD is guarded by that view's last position."""
        chain = self.known
        if self.after is None or chain is None or chain.find(self.op.key):
            return
        self._keep_window(chain)
        found = check(chain, self.op.key, self.after, self.searched)
        if isinstance(found, Lookup):
            yield from self._lookup([found])
            found = check(chain, self.op.key, self.after, self.searched)
        if isinstance(found, Position):
            self.after = found

    def round(self, now: int) -> Round[Stamp | Sum]:
        if self.failing:
            return (yield from self._fail_negative(now))
        if self.landed is not None:  # our ADD reached zero; the completion write did not answer
            if self.known is not None:
                yield from self._complete(self.known, now)
            return self.landed
        if not self.unknown:
            self.sent = START if self.known is None else self.known.position
        yield from self._preread()
        for _ in range(PASSES):
            after = self.after
            reply = yield from self._io(Add(self.tag, self.delta, self.op, self.owner, now, after))
            if isinstance(reply, Written):
                return (yield from self._applied_add(reply, now))
            current, now = reply.current, judged_at(reply, now)  # the deadline test's time, if later
            self._saw(current)
            if current is not None:
                self._keep_window(current)
            while isinstance(verdict := self._judge(current, now), Lookup):
                yield from self._lookup([verdict])
            if isinstance(verdict, Duplicate):
                self.events["duplicates"] += 1
                if current is not None and current.state == "pending" and is_negative(current.value):
                    self.failing, self.landed = True, verdict.result  # the fail-write did not land
                    return (yield from self._fail_negative(now))
                if verdict.result.acked and current is not None and current.state == "pending":
                    yield from self._complete(current, now)  # our completion's state write was lost
                return verdict.result
            if isinstance(verdict, Reject):
                if current is None:
                    self.gone = True
                raise verdict.error
            # Not applied up to the chain it has checked: again, guarded by that chain.
            assert current is not None
            if self.after is None or after == current.position:
                break  # refused for no reason visible in the chain returned: back off
            self.after = current.position
        self.events["conflicts"] += 1
        raise Again

    def _judge(self, chain: Chain | None, now: int) -> Verdict:
        return self.rules.judge_stamp(
            self.tag, chain, self.delta, self.op, self.owner, now, self.after, self.searched
        )

    def _applied_add(self, reply: Written, now: int) -> Generator[Request, Any, Stamp | Sum]:
        chain = self._after(reply)
        at = chain.seq if not reply.later else chain.position_of(self.op.key)
        where = None if at is None else Position(chain.position.lineage, at)
        if is_negative(chain.value):
            self.failing, self.landed = True, result(chain.value, acked=False, position=where)
            return (yield from self._fail_negative(now))
        # A chain read back after the write may hold later ADDs too; none lands once
        # the sum is zero (the condition refuses it), so this write reached zero
        # exactly when its op is still the last one appended.
        last = not reply.later or (bool(chain.ops) and chain.ops[-1].key == self.op.key)
        if is_zero(chain.value) and last:
            self.landed = result(chain.value, acked=True, position=where)
            yield from self._complete(chain, now)
            return self.landed
        if at is not None and not reply.later:
            upto = responsible(at, self.rules.window_of(chain))
            if upto is not None:
                yield from self._move(chain, upto, now)
        return result(chain.value, acked=False, position=where)

    def _fail_negative(self, now: int) -> Generator[Request, Any, Stamp | Sum]:
        """Our op landed on a chain pending below zero: fail it (sent again each round
        while :attr:`failing`). Raises :class:`TagFailed`; returns the stamp's result
        (not the completing one) when the start landed meanwhile and the chain acked,
        and a copy's duplicate result for a copy."""
        self.events["negative"] += 1
        reply = yield from self._io(MarkFailed(self.tag, NEGATIVE, None, now))
        if isinstance(reply, Rejected):
            now = judged_at(reply, now)
        current = reply.chain if isinstance(reply, Written) else reply.current
        self._saw(current)
        state = None if current is None else self.rules.effective_state(current, now)
        if isinstance(reply, Rejected) and current is None:
            raise self._not_found()
        landed = self.landed
        assert landed is not None
        if isinstance(reply, Rejected) and state == "acked":  # the start landed first: it completed
            self.failing = False
            assert current is not None
            return result(current.value, acked=False, duplicate=landed.duplicate, position=landed.position)
        if isinstance(reply, Rejected) and state != "failed":
            raise Again  # not refused for a reason the chain shows: once more
        if landed.duplicate:
            return landed
        reason = (current.reason if current is not None else None) or NEGATIVE
        raise TagFailed(f"chain {self.tag!r} has failed: {reason}", tag=self.tag, reason=reason)

    def _complete(self, chain: Chain, now: int) -> Generator[Request, Any, None]:
        """Store the zero-sum chain as ``acked`` (its retention starts now)."""
        done = self.rules.completed(chain, now)
        reply = yield from self._io(Put(done, chain))
        if isinstance(reply, Rejected):
            current = reply.current
            if current is not None and current.state == "pending" and is_zero(current.value):
                done = self.rules.completed(current, now)
                reply = yield from self._io(Put(done, current))  # a trim changed the token: once more
        if isinstance(reply, Written):
            self.known = done
            self.events["completions"] += 1
            if self.rules.delete_on_ack:
                yield from remove_tombstone(self, done)

    def _move(self, chain: Chain, upto: int | None, now: int) -> Generator[Request, Any, None]:
        """Move the blocks this writer owns (up to position ``upto``) to history
        (docs/concepts.md, "Moving a block"). Never fails the applied stamp."""
        window = self.rules.window_of(chain)
        blocks = due(chain, window, committed=chain.seq, upto=upto)
        if not blocks:
            return
        try:
            written: set[int] = set()
            own = blocks[-1]
            if len(blocks) > 1 and (own.index + 1) * BLOCK == upto:  # its own block is the last
                current: Chain | None = None
                for _ in range(OWN_TRIMS):
                    refused = yield from self._trim_blocks(chain, [own], window, now, written)
                    if refused is None:
                        return
                    current = refused.current
                    if current is None:
                        break
                    moved = current.cut_seq >= own.index * BLOCK
                    if moved or current.position.lineage != chain.position.lineage:
                        return  # moved by another writer, or the chain was created again
                if current is not None:
                    blocks = [b for b in blocks if b.index * BLOCK >= current.cut_seq]
            yield from self._trim_blocks(chain, blocks, window, now, written)
        except Transient:
            self.events["trims_lost"] += 1
        except Exception as exc:  # noqa: BLE001 - a failed move must not fail the applied stamp
            log.warning("chain %r: moving ops to history failed: %r", self.tag, exc)
            self.events["trims_failed"] += 1

    def _trim_blocks(
        self, view: Chain, blocks: list[Block], window: int, now: int, written: set[int]
    ) -> Generator[Request, Any, Rejected | None]:
        """Write the history of ``blocks`` (those not in ``written``), then trim them in
        order. None when every trim was applied, or refused only because another writer
        had just removed exactly that block; else the refusal that stopped it."""
        unwritten = [b for b in blocks if b.index not in written]
        if unwritten:
            yield from self._write_history(view, unwritten)
            written.update(b.index for b in unwritten)
        cut = blocks[0].index * BLOCK  # cutn once the blocks before it have left the list
        for _ in blocks:
            trim = Trim(self.tag, BLOCK, window, now, cut, view.position.lineage)
            reply = yield trim
            cut += BLOCK
            if isinstance(reply, Written):
                self.events["trims"] += 1
                if self.rules.trim_allowed(self.known, trim):  # keep the view the next stamp guards with
                    assert self.known is not None
                    self.known = self.rules.trimmed(self.known, trim)
                continue
            self.events["trims_skipped"] += 1
            # Refused: go on with the next block only if another writer (the owner of
            # this one, late) has just removed exactly this one.
            refused = reply if isinstance(reply, Rejected) else Rejected(None)
            current = refused.current
            if current is None or current.position.lineage != view.position.lineage or current.cut_seq != cut:
                return refused
        return None
