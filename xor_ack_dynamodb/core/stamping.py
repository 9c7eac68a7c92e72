"""The stamp calls: :class:`StampCall` (a read-modify-write, xor mode and the batch
calls) and :class:`AddCall` (sum mode's one blind ``ADD``), as sans-IO state machines.

Both apply a stamp at most once per op id for the chain's lineage, however many ops
landed since an earlier copy (:mod:`.history`). The timelines (more, with botocore's
resends and lineages, in docs/concepts.md, "Exactly once for a chain's whole life"):

Whole-life duplicate, sum mode (the common case pays nothing)::

    A: ADD op=m, guard cutn <= p (p: where an earlier copy could first have landed)
    T: cutn <= p: the window holds everything after p; m not in it ──> applied, 1 request
    T: cutn > p (history moved past p): rejected, ALL_OLD names cutn
    A: reads history blocks (p, cutn] (one BatchGetItem)
       m found ──> duplicate;  a block missing ──> OutcomeUnknown;
       m in none ──> ADD again, guard cutn <= seq seen (its window was checked too)

A stamp whose op id the library drew in this call carries no guard: no earlier copy
can exist. Once its own write's outcome is unknown, its copy is checked from the chain
as the call last saw it.

Siblings (the children of one parent, all bounded by the parent's position p)::

    A: blocks (p, cutn] of its cached view are in the tracker's history cache (it
       wrote or read them: blocks never change), m in none of them
    A: ADD m, guard cutn <= seq of the view ──> applied, 1 request
    (a trim passed the view's last op since: refused, the new blocks read, ADD again)

A botocore resend of a guarded ADD carries its guard: harmless. An unguarded one (a
drawn op id) is stopped (stores/dynamodb/resend.py); the call's own retry is guarded
from the view it had when the first copy went out.

A block moving to history, sum mode (exactly one writer owns each block)::

    W: ADD lands at position window + (b+1)*BLOCK: W owns block b
    W: PutItem history block b (the ops at its positions: W's ALL_NEW has them)
    W: UpdateItem REMOVE ops[0..BLOCK-1], cutn += BLOCK if cutn = b*BLOCK
    A racing or resent trim finds cutn moved on and is refused: removed once.

A negative sum (a finish that overtook its start, or a double application)::

    A: ADD -e ──> sum -e (pending), A must fail the chain
    A: MarkFailed ──> throttled; A's round runs again: MarkFailed again, until it lands
       ──> TagFailed; or it is refused because the start landed meanwhile (sum 0, the
       start's writer completed it) ──> A's stamp returns, applied, on an acked chain
    A copy of A's op that finds the chain still pending below zero fails it too.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any, TypeVar

from ..errors import OutcomeUnknown, TagFailed
from ..stamps import Position, Stamp, Sum, result
from .algebra import Value, is_negative, is_zero
from .calls import Again, Call, Round, Transient, remove_tombstone
from .chain import BLOCK, Chain, Op, random_op
from .history import (
    DRAWN,
    Block,
    BlockCache,
    Clear,
    Delivery,
    Lookup,
    Searched,
    Unknowable,
    due,
    responsible,
    scope,
)
from .messages import (
    Add,
    Guard,
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
from .verdicts import NEGATIVE, Duplicate, NeedHistory, Reject, StampItem, StampPlan

__all__ = ["StampCall", "AddCall"]

log = logging.getLogger("xor_ack_dynamodb")

#: History reads one batch read may ask for (DynamoDB's BatchGetItem limit).
READ_BLOCKS = 100
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
            unread = self.searched.unread(lookup)
            for start in range(0, len(unread), READ_BLOCKS):
                chunk = unread[start : start + READ_BLOCKS]
                reply = yield ReadHistory(self.tag, lookup.lineage, chunk)
                assert isinstance(reply, HistoryRead)
                if reply.unprocessed:
                    self.events["conflicts"] += 1
                    raise Again  # the store did not get to some keys: back off, ask again
                self.searched.add(lookup.lineage, chunk, reply.blocks)
                self.events["history_reads"] += 1

    def _applied(self, chain: Chain, key: bytes, after: Position) -> Generator[Request, Any, bool]:
        """Whether the op ``key`` landed on ``chain`` after ``after``: in its window, or
        in its history. Raises :class:`OutcomeUnknown` where that is not kept."""
        if chain.find(key) is not None:
            return True
        found = scope(chain, after)
        if isinstance(found, Clear):
            return False
        if isinstance(found, Lookup):
            yield from self._lookup([found])
            hit = self.searched.find(found, key)
            if not isinstance(hit, Unknowable):
                return hit is not None
            found = hit
        raise OutcomeUnknown(
            f"chain {self.tag!r}: a write's response was lost and {found.why}, so whether it was "
            "applied cannot be told; nothing more was written",
            tag=self.tag,
        )

    def _keep_window(self, chain: Chain) -> None:
        """Keep the history blocks whole in ``chain``'s window (a block is the ops at its
        positions, wherever they were seen): a later check need not read them."""
        whole = due(chain, 0, chain.seq, most=len(chain.ops) // BLOCK)
        self.searched.add(chain.line, tuple(b.index for b in whole), {b.index: b.ops for b in whole})

    def _write_history(self, chain: Chain, blocks: list[Block]) -> Generator[Request, Any, None]:
        reply = yield WriteHistory(self.tag, chain.line, tuple(blocks), self.rules.history_purge(chain))
        assert isinstance(reply, Written)
        self.events["history_writes"] += 1
        self.searched.add(chain.line, tuple(b.index for b in blocks), {b.index: b.ops for b in blocks})


class StampCall(_History[StampPlan]):
    """An xor-mode stamp, or several combined into one write (``CombiningTracker``), or
    a stamp of a batch call in either mode: read (or take the last known value), plan
    with the rules (reading the history blocks a stamp's duplicate check needs), write
    the blocks the write moves out of the window, then write conditioned on the chain's
    token. Returns the :class:`StampPlan`, whose outcomes are in the stamps' order.

    A last known value may be stale: it is only ever used to decide to *write* (the
    token condition rejects a stale base); deciding not to write (duplicate, refusal)
    takes a fresh read. After a write whose outcome is unknown, the next round reads
    and looks for the write's marker (a combined write) or op (a single stamp) in the
    window and the history since the chain the write was based on, and refuses with
    :class:`OutcomeUnknown` only where neither can tell (a foreign writer reset it).
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
                yield from self._finish_tombstone(chain)
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
            self.events["duplicates"] += plan.duplicates
            yield from self._finish_tombstone(chain)
            return plan
        unwritten = [b for b in plan.moved if (plan.new.line, b.index) not in self.moved]
        if unwritten:
            yield from self._write_history(plan.new, unwritten)
            self.moved.update((plan.new.line, b.index) for b in unwritten)
        if marker is not None:
            self.sent[marker.key] = plan
        if not self.unknown:
            self.base = chain
            self.sent_at = Position(plan.new.line, chain.seq)
        reply = yield from self._io(Put(plan.new, chain, now))
        if isinstance(reply, Written):
            self.known, self.fresh = plan.new, False
            self.events["duplicates"] += plan.duplicates
            self.events["trims"] += len(plan.moved)
            if plan.new.state == "acked" and self.rules.delete_on_ack:
                yield from remove_tombstone(self, plan.new)
            return plan
        current, now = reply.current, judged_at(reply, now)  # the deadline test's time, if later
        self._saw(current)
        if current is None:
            raise self._not_found()
        landed = yield from self._landed(current)
        if landed is not None:
            yield from self._finish_tombstone(current)
            return landed
        settled = self.rules.plan(current, self._items(current), now, None, self.searched)
        if settled.new is None and not settled.lookups:  # every stamp is a duplicate or refused
            self.events["duplicates"] += settled.duplicates
            yield from self._finish_tombstone(current)
            return settled
        self.events["conflicts"] += 1
        raise Again

    def _items(self, chain: Chain) -> list[StampItem]:
        """The stamps with what is known of their earlier copies: after a lost single
        stamp, its own copy too (it would have landed after :attr:`sent_at`)."""
        if not self.unknown or self.combined:
            return self.stamps
        delta, op, owner, delivery = self.stamps[0]
        after, sent = delivery.after, self.sent_at
        if delivery.drawn or (sent is not None and sent.lineage != chain.line):
            after = sent  # only this call's own copy, or one on a lineage since replaced
        elif after is not None and sent is not None and sent.lineage == after.lineage:
            after = Position(after.lineage, min(after.seq, sent.seq))
        return [(delta, op, owner, Delivery(after))]

    def _unchanged_foreign(self, chain: Chain) -> bool:
        """After a lost write over an item without history (the Node package's): the
        item is exactly as that write found it, so the write did not land (had it, the
        item would carry its token)."""
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
        window, or its history since the write's base)."""
        for key, plan in self.sent.items():
            if chain.find(key) is not None or (
                self.sent_at is not None
                and not self._unchanged_foreign(chain)
                and (yield from self._applied(chain, key, self.sent_at))
            ):
                self.events["duplicates"] += plan.duplicates
                return plan
        return None

    def _finish_tombstone(self, chain: Chain) -> Generator[Request, Any, None]:
        """``delete_on_ack``: a duplicate of the completing stamp (ours, whose response
        was lost) finds the acked tombstone still there; delete it as the first attempt
        would have."""
        if self.rules.delete_on_ack and chain.state == "acked":
            yield from remove_tombstone(self, chain)


class AddCall(_History[Stamp | Sum]):
    """A sum-mode stamp: one conditional ``ADD`` that never loses a race. The writer
    whose ADD returns zero completed the chain and stores it as ``acked``; a writer
    that sees the chain pending below zero fails it (:data:`~.verdicts.NEGATIVE`), the
    fail-write retried until it lands or the chain is found acked; the writer that owns
    a history block moves it. A rejected ADD is judged on the chain the rejection
    returned: a duplicate, an error, or (a guard that found history moved on) a history
    read and the ADD again, guarded by what was read."""

    def __init__(
        self,
        rules: ChainRules,
        tag: str,
        delta: Value,
        op: Op,
        owner: str | None,
        known: Chain | None = None,
        delivery: Delivery = DRAWN,
        history: BlockCache | None = None,
    ) -> None:
        super().__init__(rules, tag, known)
        self.delta, self.op, self.owner = delta, op, owner
        self.delivery = delivery
        self.view: Chain | None = known  # the chain as seen when the first copy went out
        self.checked: Guard | None = None  # a guard a history read established
        self.searched = Searched(history)
        self.failing = False  # our op landed on a chain below zero: fail it (every round)
        self.landed: Position | None = None  # where our op landed
        self.copy: Stamp | Sum | None = None  # our op was found applied by an earlier copy

    def _current(self) -> Delivery:
        """The delivery as it stands: after an unknown outcome, this call's own copy
        may have landed (after :attr:`view`'s last op) as well as any earlier one."""
        return self.delivery.unknown(self.view) if self.unknown else self.delivery

    def _condition(self) -> Guard | None:
        delivery = self._current()
        if delivery.drawn:
            return None
        if self.checked is not None:
            return self.checked
        after = delivery.after
        return Guard(0) if after is None else Guard(after.seq, after.lineage)

    def _preread(self) -> Generator[Request, Any, None]:
        """Check the op against the chain as last seen, its window and its history since
        the bound (the blocks mostly in the tracker's cache: siblings share them), so
        that the ADD is guarded by that view's last position (:class:`Guard`) and lands
        at once unless a trim has passed it since (``max_ops`` stamps later at least)."""
        chain, delivery = self.known, self._current()
        if delivery.drawn or self.checked is not None or chain is None or chain.find(self.op.key):
            return
        self._keep_window(chain)
        found = scope(chain, delivery.after)
        if isinstance(found, Lookup):
            yield from self._lookup([found])
            if self.searched.find(found, self.op.key) is not None:
                return
        if not isinstance(found, Unknowable):
            after = delivery.after
            bound = after.seq if after is not None and after.lineage == chain.line else 0
            self.checked = Guard(max(chain.seq, bound), chain.line)

    def round(self, now: int) -> Round[Stamp | Sum]:
        if self.failing:
            return (yield from self._fail_negative(now))
        if not self.unknown:
            self.view = self.known
        yield from self._preread()
        for _ in range(PASSES):
            guard = self._condition()
            reply = yield from self._io(Add(self.tag, self.delta, self.op, self.owner, now, guard))
            if isinstance(reply, Written):
                return (yield from self._applied_add(reply, now))
            current, now = reply.current, judged_at(reply, now)  # the deadline test's time, if later
            self._saw(current)
            if current is not None:
                self._keep_window(current)
            delivery = self._current()
            verdict = self.rules.judge_stamp(
                self.tag, current, self.delta, self.op, self.owner, now, delivery, self.searched
            )
            while isinstance(verdict, NeedHistory):
                yield from self._lookup([verdict.lookup])
                verdict = self.rules.judge_stamp(
                    self.tag, current, self.delta, self.op, self.owner, now, delivery, self.searched
                )
            if isinstance(verdict, Duplicate):
                self.events["duplicates"] += 1
                if current is not None and current.state == "pending" and is_negative(current.value):
                    self.failing, self.landed = True, verdict.result.position  # the fail-write did not land
                    self.copy = verdict.result
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
            checked = Guard(current.seq, current.line)
            if delivery.drawn or guard == checked:
                break  # refused for no reason visible in the chain returned: back off
            self.checked = checked
        self.events["conflicts"] += 1
        raise Again

    def _applied_add(self, reply: Written, now: int) -> Generator[Request, Any, Stamp | Sum]:
        after = self._after(reply)
        position = after.seq if not reply.later else after.position_of(self.op.key)
        where = None if position is None else Position(after.line, position)
        if is_negative(after.value):
            self.failing, self.landed = True, where
            return (yield from self._fail_negative(now))
        # A chain read back after the write may hold later ADDs too; none lands once
        # the sum is zero (the condition refuses it), so this write reached zero
        # exactly when its op is still the last one appended.
        last = not reply.later or (bool(after.ops) and after.ops[-1].key == self.op.key)
        if is_zero(after.value) and last:
            yield from self._complete(after, now)
            return result(after.value, acked=True, position=where)
        if position is not None and not reply.later:
            upto = responsible(position, self.rules.window_of(after))
            if upto is not None:
                yield from self._move(after, upto, now)
        return result(after.value, acked=False, position=where)

    def _fail_negative(self, now: int) -> Generator[Request, Any, Stamp | Sum]:
        """Our op landed on a chain that is pending below zero: some stamp was applied
        twice, or a finish overtook its start. Fail the chain; a transient error ends the
        round and the next one sends the fail-write again (:attr:`failing`). The caller
        learns the chain's outcome: :class:`TagFailed`, or, when the fail-write is
        refused because the start landed meanwhile and the chain acked, the stamp's
        result (applied, not the completing one). A copy of an op applied earlier gets
        its duplicate result, as on a chain that failed before it came."""
        self.events["negative"] += 1
        reply = yield from self._io(MarkFailed(self.tag, NEGATIVE, None, now))
        if isinstance(reply, Rejected):
            now = judged_at(reply, now)
        current = reply.chain if isinstance(reply, Written) else reply.current
        self._saw(current)
        state = None if current is None else self.rules.effective_state(current, now)
        if isinstance(reply, Rejected) and current is None:
            raise self._not_found()
        if isinstance(reply, Rejected) and state == "acked":  # the start landed first: it completed
            self.failing = False
            assert current is not None
            return result(current.value, acked=False, duplicate=self.copy is not None, position=self.landed)
        if isinstance(reply, Rejected) and state != "failed":
            raise Again  # not refused for a reason the chain shows: once more
        if self.copy is not None:
            return self.copy
        reason = (current.reason if current is not None else None) or NEGATIVE
        raise TagFailed(f"chain {self.tag!r} has failed: {reason}", tag=self.tag, reason=reason)

    def _complete(self, chain: Chain, now: int) -> Generator[Request, Any, None]:
        """Store the zero-sum chain as ``acked``. Reads decide ``acked`` from a zero sum
        anyway; this write makes the tombstone's retention start now."""
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
        """Move the blocks this writer owns (up to position ``upto``) out of the window:
        their history first, then one trim per block, each conditioned on the list
        still starting at that block. Housekeeping after a stamp that has been applied:
        whatever happens to it (refused because another writer moved the block, lost,
        or failed outright), the stamp's outcome stands, and the writer of the next
        block moves what is left.

        Own block first: when the list still holds blocks before this writer's own
        (their owners' moves, two round trips each, are on their way while others
        append), it writes and trims its own block alone, which lands once theirs have.
        A trim refused because an earlier block is still there is sent once more (that
        block's own trim is most likely landing meanwhile); only when it is refused
        again (an owner lost, or far slower than this writer) does it move the earlier
        blocks itself, in order. A block is written to history once and trimmed once in
        the common case, however many writers append meanwhile."""
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
                    if current.line != chain.line or current.cut_seq >= own.index * BLOCK:
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
        """Write the history of ``blocks`` (consecutive; those not in ``written``), then
        trim them in order. None when every trim was applied, or was refused only
        because another writer had just removed exactly that block; else the refusal
        that stopped it (its ``current`` None when the backend returned no item)."""
        unwritten = [b for b in blocks if b.index not in written]
        if unwritten:
            yield from self._write_history(view, unwritten)
            written.update(b.index for b in unwritten)
        cut = blocks[0].index * BLOCK  # cutn once the blocks before it have left the list
        for _ in blocks:
            trim = Trim(self.tag, BLOCK, window, now, cut, view.line)
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
            if current is None or current.line != view.line or current.cut_seq != cut:
                return refused
        return None
