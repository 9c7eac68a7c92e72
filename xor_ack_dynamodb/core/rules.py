"""The chain rules: pure decisions over an immutable :class:`Chain` and "now", once for
every store and driver, and the conditions a store evaluates for its blind writes.

States, op ids: docs/concepts.md. A writer's deadline test (``before_deadline``), and a
reader's ``expired`` only past the deadline plus ``skew``: docs/expiry.md, "Clocks and
the skew margin". A sum-mode chain at zero reads ``acked`` even if its state write was lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import (
    BufferLengthsUnequal,
    ChainModeMismatch,
    NotOwner,
    OpIdReused,
    OutcomeUnknown,
    TagAcked,
    TagExists,
    TagExpired,
    TagFailed,
    TagNotFound,
    XorAckError,
)
from ..stamps import Position, result
from ..status import ChainStatus, State, epoch_to_datetime
from .algebra import Algebra, Mode, Value, XorAlgebra, is_negative, is_zero
from .chain import BLOCK, Chain, Op, StoredState, check_window, new_lineage, new_token, random_op, updated
from .history import START, Block, Found, Lookup, Searched, Unknowable, check, due
from .messages import Trim
from .verdicts import (
    APPLY,
    DEFERRED,
    NEGATIVE,
    Duplicate,
    Reject,
    StampItem,
    StampPlan,
    Unchanged,
    Verdict,
)

#: The most stamps one combined write carries.
BATCH_CAP = BLOCK - 1


def not_found(tag: str) -> TagNotFound:
    return TagNotFound(f"chain {tag!r} does not exist", tag=tag)


def _failed(tag: str, reason: str | None) -> TagFailed:
    return TagFailed(f"chain {tag!r} has failed" + (f": {reason}" if reason else ""), tag=tag, reason=reason)


@dataclass(frozen=True, slots=True)
class ChainRules:
    """The rule parameters of one tracker (``TrackerOptions`` documents each; ``ttl``
    None: chains that time out by rotation only). Picklable. ``window``: op ids an item
    keeps at least, up to ``window + BLOCK`` before a block moves to history."""

    algebra: Algebra = field(default_factory=XorAlgebra)
    ttl: int | None = 3600
    retention: int = 86400
    skew: int = 5
    window: int = 8
    delete_on_ack: bool = False

    def __post_init__(self) -> None:
        check_window(self.window)  # ttl, retention and skew: checked by core.factory.seconds

    @property
    def mode(self) -> Mode:
        return self.algebra.mode

    def history_purge(self, chain: Chain) -> int | None:
        """When a history block written for ``chain`` may be purged."""
        return None if chain.purge_at is None else chain.purge_at + self.retention

    def _purge(self, now: int) -> int | None:
        """When a chain finishing now may be purged (None: by rotation only)."""
        return None if self.ttl is None else now + self.retention

    # -- reading ------------------------------------------------------------------------

    def window_of(self, chain: Chain) -> int:
        return chain.window if chain.window is not None else self.window

    def effective_state(self, chain: Chain, now: int) -> State:
        """The state a reader sees at ``now`` (see the module doc)."""
        if chain.state != "pending":
            return chain.state
        if is_zero(chain.value):
            return "acked"
        if chain.deadline is not None and chain.deadline + self.skew < now:
            return "expired"
        return "pending"

    def status(self, chain: Chain, now: int) -> ChainStatus:
        state = self.effective_state(chain, now)
        when = chain.deadline if state in ("pending", "expired") else chain.purge_at
        return ChainStatus(
            tag=chain.tag,
            state=state,
            value=result(chain.value, acked=state == "acked"),
            expires_at=epoch_to_datetime(when),
            reason=chain.reason,
            version=chain.version,
            owner=chain.owner,
            mode=chain.mode,
        )

    def _refusal(self, chain: Chain, now: int) -> XorAckError | None:
        """Why a stamp or touch may not be written on ``chain`` at ``now``, if it may not."""
        state = self.effective_state(chain, now)
        if state == "acked":
            return TagAcked(f"chain {chain.tag!r} is already acked", tag=chain.tag)
        if state == "failed":
            return _failed(chain.tag, chain.reason)
        if state == "expired" or (chain.deadline is not None and chain.deadline < now):
            return TagExpired(f"chain {chain.tag!r} expired before it was acked", tag=chain.tag)
        return None

    def _owner_refusal(self, chain: Chain, owner: str | None) -> XorAckError | None:
        if owner is not None and chain.owner != owner:
            return NotOwner(f"chain {chain.tag!r} belongs to {chain.owner!r}, not {owner!r}", tag=chain.tag)
        return None

    # -- create -------------------------------------------------------------------------

    def new_chain(
        self, tag: str, value: Value, op: Op, owner: str | None, now: int, old: Chain | None = None
    ) -> Chain:
        """The chain a create writes (over ``old`` when it overwrites one)."""
        deadline = None if self.ttl is None else now + self.ttl
        return Chain(
            tag=tag,
            mode=self.mode,
            value=value,
            state="pending",
            deadline=deadline,
            purge_at=None if deadline is None else deadline + self.skew + self.retention,
            token=new_token(),
            version=(old.version + 1) if old is not None else 1,
            window=self.window,
            lineage=new_lineage(),
            create_op=op,
            owner=owner,
            created_at=now,
            updated_at=now,
        )

    def overwritable(self, chain: Chain, now: int) -> bool:
        """Whether a create may replace ``chain``: it timed out (deadline plus skew
        passed), or it is a tombstone past its retention."""
        state = self.effective_state(chain, now)
        if state == "expired":
            return True
        if state in ("acked", "failed"):
            return chain.purge_at is not None and chain.purge_at < now
        return False

    def judge_create(self, chain: Chain, op: Op, now: int, replace_expired: bool = True) -> Verdict:
        """A create that found ``chain`` under its tag. Its own op is checked first, for
        the chain's whole life: a redelivered create returns the chain as it is, even
        expired, never revives it. Without ``replace_expired``, a chain that timed out
        is not overwritten either (``TagExists``)."""
        if chain.create_op is not None and chain.create_op.key == op.key:
            if not chain.create_op.same_payload(op):
                return Reject(
                    OpIdReused(
                        f"create op id reused on chain {chain.tag!r} with another value", tag=chain.tag
                    )
                )
            start = Position(chain.position.lineage, 0)
            return Duplicate(result(chain.value, acked=False, duplicate=True, position=start))
        state = self.effective_state(chain, now)
        if not replace_expired and state == "expired":
            return Reject(
                TagExists(
                    f"chain {chain.tag!r} expired and is kept (create(..., replace_expired=False))",
                    tag=chain.tag,
                )
            )
        if self.overwritable(chain, now):
            return APPLY
        return Reject(TagExists(f"chain {chain.tag!r} already exists ({state})", tag=chain.tag))

    # -- stamp --------------------------------------------------------------------------

    def judge_stamp(
        self,
        tag: str,
        chain: Chain | None,
        delta: Value,
        op: Op,
        owner: str | None,
        now: int,
        after: Position | None = None,
        searched: Searched | None = None,
    ) -> Verdict:
        """A stamp on ``chain`` as it stands: duplicate, refused, to be applied, or a
        :class:`~.history.Lookup` of the history blocks to read first.

        A known op (in the window, then in the history since ``after``) is a duplicate
        whatever happened to the chain since, so it is looked for before the state may
        refuse the stamp; where that history is gone, :class:`OutcomeUnknown`. Only the
        op that completed the chain gets a duplicate with ``acked`` True.
        """
        if chain is None:
            return Reject(not_found(tag))
        if chain.mode != self.mode:
            return Reject(
                ChainModeMismatch(
                    f"chain {chain.tag!r} is a {chain.mode}-mode chain; this tracker is in {self.mode} mode",
                    tag=chain.tag,
                )
            )
        found = check(chain, op.key, None, None)  # the window first: before the owner
        if isinstance(found, Found):
            return self._known(chain, found, op, now)
        refusal = self._owner_refusal(chain, owner)
        if refusal is not None:
            return Reject(refusal)
        found = check(chain, op.key, after, searched)
        if isinstance(found, Found):
            return self._known(chain, found, op, now)
        if isinstance(found, Lookup):
            return found
        if isinstance(found, Unknowable):
            return Reject(self._unknowable(chain, found))
        refusal = self._refusal(chain, now)
        if refusal is not None:
            return Reject(refusal)
        if isinstance(delta, bytes) and isinstance(chain.value, bytes) and len(delta) != len(chain.value):
            return Reject(
                BufferLengthsUnequal(
                    f"stamp is {len(delta)} bytes but chain {chain.tag!r} holds {len(chain.value)}",
                    tag=chain.tag,
                )
            )
        return APPLY

    def _known(self, chain: Chain, found: Found, op: Op, now: int) -> Verdict:
        """An op the chain already applied (at ``found.position``)."""
        if not found.op.same_payload(op):
            return Reject(
                OpIdReused(f"op id reused on chain {chain.tag!r} with a different stamp", tag=chain.tag)
            )
        completed = (
            self.effective_state(chain, now) == "acked" and bool(chain.ops) and chain.ops[-1].key == op.key
        )
        return Duplicate(result(chain.value, acked=completed, duplicate=True, position=found.position))

    @staticmethod
    def _unknowable(chain: Chain, why: Unknowable) -> OutcomeUnknown:
        return OutcomeUnknown(
            f"chain {chain.tag!r}: whether this op was applied before cannot be told ({why.why}); "
            "nothing was written",
            tag=chain.tag,
        )

    @staticmethod
    def adopt(chain: Chain) -> Chain:
        """``chain`` with a new lineage if a foreign writer reset it (no lineage): its
        earlier ops are unknown (``adopted``). A new create op too, so that a writer whose
        earlier write's outcome is unknown can tell the history was reset."""
        if chain.lineage is not None:
            return chain
        return replace(chain, lineage=new_lineage(), adopted=True, create_op=random_op())

    def stamped(self, chain: Chain, delta: Value, ops: tuple[Op, ...], now: int) -> tuple[Chain, list[Block]]:
        """``chain`` after a read-modify-write that applies ``delta`` with ``ops`` (an
        ``acked`` tombstone at zero, a ``failed`` one below), and the history blocks
        that write moves out (to be written first)."""
        value = self.algebra.combine(chain.value, delta)
        window = self.window_of(chain)
        done = is_zero(value)
        grown = updated(
            chain,
            now,
            value=value,
            ops=chain.ops + ops,
            seq=chain.seq + len(ops),
            window=window,
            state="acked" if done else chain.state,
            purge_at=self._purge(now) if done else chain.purge_at,
        )
        if is_negative(value):
            grown = replace(grown, state="failed", reason=NEGATIVE, purge_at=self._purge(now))
        moved = due(grown, window, committed=chain.seq)
        if moved:
            count = len(moved) * BLOCK
            grown = replace(grown, ops=grown.ops[count:], cut_seq=grown.cut_seq + count)
        return grown, moved

    def plan(
        self,
        chain: Chain,
        stamps: list[StampItem],
        now: int,
        marker: Op | None = None,
        searched: Searched | None = None,
    ) -> StampPlan:
        """Replay ``stamps`` in order on ``chain``, as one ``stamp()`` after another
        would (a duplicate, also twice in the batch, returns the value at its turn; a
        stamp after the batch completed the chain gets :class:`TagAcked`), or list the
        history blocks to read first (``lookups``). ``marker`` goes first in the written
        op list, so a writer that lost a combined write's response can tell it landed.
        At most :data:`BATCH_CAP` stamps are applied in one write (the rest
        :data:`DEFERRED`).
        """
        out = StampPlan(new=None)
        chain = current = self.adopt(chain)  # a foreign writer's item: this write starts a lineage
        applied: list[Op] = []
        total: Value | None = None
        first = chain.seq + (1 if marker is not None and len(stamps) > 1 else 0)
        for delta, op, owner, after in stamps:
            if len(applied) >= BATCH_CAP:
                out.outcomes.append(DEFERRED)
                continue
            verdict = self.judge_stamp(chain.tag, current, delta, op, owner, now, after, searched)
            if isinstance(verdict, Lookup):
                out.lookups.append(verdict)
                out.outcomes.append(DEFERRED)
            elif isinstance(verdict, Duplicate):
                out.duplicates += 1
                out.outcomes.append(verdict.result)
            elif isinstance(verdict, Reject):
                out.outcomes.append(verdict.error)
            else:
                value = self.algebra.combine(current.value, delta)
                done = is_zero(value)
                applied.append(op)
                total = delta if total is None else self.algebra.combine(total, delta)
                state: StoredState = "acked" if done else "failed" if is_negative(value) else "pending"
                current = replace(
                    current, value=value, ops=current.ops + (op,), seq=current.seq + 1, state=state
                )
                where = Position(chain.position.lineage, first + len(applied))
                if state == "failed":
                    out.outcomes.append(_failed(chain.tag, NEGATIVE))
                else:
                    out.outcomes.append(result(value, acked=done, position=where))
        if out.lookups:
            out.new, out.outcomes = None, []
            return out
        if total is not None:
            ops = ((marker,) if marker is not None and len(stamps) > 1 else ()) + tuple(applied)
            out.new, out.moved = self.stamped(chain, total, ops, now)
        return out

    # -- fail, touch ----------------------------------------------------------------------

    def judge_fail(self, tag: str, chain: Chain | None, owner: str | None, now: int) -> Verdict:
        """A pending or expired chain fails; a failed one keeps its first reason; an
        acked one refuses."""
        if chain is None:
            return Reject(not_found(tag))
        refusal = self._owner_refusal(chain, owner)
        if refusal is not None:
            return Reject(refusal)
        state = self.effective_state(chain, now)
        if state == "acked":
            return Reject(TagAcked(f"chain {chain.tag!r} is already acked", tag=chain.tag))
        if state == "failed":
            return Unchanged()
        return APPLY

    def failed(self, chain: Chain, reason: str | None, now: int) -> Chain:
        reason = reason if reason else chain.reason
        return updated(chain, now, state="failed", reason=reason, purge_at=self._purge(now))

    def judge_touch(self, tag: str, chain: Chain | None, owner: str | None, now: int) -> Verdict:
        """Only a pending chain whose deadline has not passed is extended."""
        if chain is None:
            return Reject(not_found(tag))
        refusal = self._owner_refusal(chain, owner) or self._refusal(chain, now)
        return Reject(refusal) if refusal is not None else APPLY

    def touched(self, chain: Chain, ttl: int | None, now: int) -> Chain:
        """``chain`` with its deadline ``ttl`` from now (None: unchanged)."""
        deadline = chain.deadline if ttl is None else now + ttl
        purge_at = chain.purge_at if deadline is None else deadline + self.skew + self.retention
        return updated(chain, now, deadline=deadline, purge_at=purge_at)

    # -- blind writes: each predicate is a write's condition (the codec's
    # ConditionExpression; the memory store calls it), and the chains they leave ----------

    def add_allowed(
        self,
        chain: Chain | None,
        op: Op,
        owner: str | None,
        now: int,
        after: Position | None = None,
    ) -> bool:
        """The condition of a sum-mode stamp (one atomic ``ADD``, no read)."""
        return (
            self.touch_allowed(chain, owner, now)
            and chain is not None
            and chain.mode == "sum"
            and self.covers(chain, after)
            and chain.find(op.key) is None
        )

    def fail_allowed(self, chain: Chain | None, owner: str | None) -> bool:
        return (
            chain is not None
            and chain.state == "pending"
            and not (chain.mode == "sum" and is_zero(chain.value))
            and (owner is None or chain.owner == owner)
        )

    def touch_allowed(self, chain: Chain | None, owner: str | None, now: int) -> bool:
        return self.fail_allowed(chain, owner) and self.before_deadline(chain, now)

    @staticmethod
    def before_deadline(chain: Chain | None, now: int) -> bool:
        """The deadline test of every write that keeps a chain going (a stamp's ``Put``
        and ``ADD``, a touch), ``now`` being the writer's clock as it is sent."""
        return chain is None or chain.deadline is None or chain.deadline >= now

    @staticmethod
    def covers(chain: Chain | None, after: Position | None) -> bool:
        """Whether ``chain`` passes the guard of a write whose op is known absent up to
        ``after`` (None: no guard): no op after ``after.seq`` has left the window, on
        ``after``'s lineage (any, for :data:`~.history.START`). An op not in the window
        then did not land."""
        if chain is None or after is None:
            return True
        same_lineage = after == START or chain.position.lineage == after.lineage
        return same_lineage and chain.cut_seq <= after.seq

    def added(self, chain: Chain, delta: Value, op: Op, now: int) -> Chain:
        """``chain`` after a sum-mode stamp, still pending: the writer that sees zero
        stores ``acked`` next (:meth:`completed`)."""
        value = self.algebra.combine(chain.value, delta)
        return updated(chain, now, value=value, ops=chain.ops + (op,), seq=chain.seq + 1)

    def completed(self, chain: Chain, now: int) -> Chain:
        """``chain`` (whose value is zero) stored as an ``acked`` tombstone."""
        return updated(chain, now, state="acked", purge_at=self._purge(now))

    def trim_allowed(self, chain: Chain | None, trim: Trim) -> bool:
        """A trim's condition: the list still starts at ``trim.cut + 1`` on its lineage
        and keeps the window after it, so trims that race (or a resend) apply once."""
        if chain is None or chain.cut_seq != trim.cut or len(chain.ops) < trim.count + trim.window:
            return False
        return chain.position.lineage == trim.lineage

    def trimmed(self, chain: Chain, trim: Trim) -> Chain:
        """``chain`` without its ``count`` oldest ops, its token kept (a write based on
        the untrimmed list may still land: its ops are then in both places)."""
        return replace(chain, ops=chain.ops[trim.count :], cut_seq=chain.cut_seq + trim.count)
