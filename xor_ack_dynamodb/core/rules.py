"""The chain rules: pure decisions over an immutable :class:`Chain` and "now".

Everything a tracker decides lives here, once, for every store (DynamoDB, memory) and
every driver (sync, asyncio): whether a create, stamp, fail or touch may be written on a
chain as it stands, is a duplicate of an op already applied, or is refused with which
error; what the chain looks like after it; which chains read as expired; how the op-id
window is kept. No I/O, no clock, no randomness except the fresh write token each new
value carries.

States. A chain is stored ``pending``, ``acked`` or ``failed``::

    pending ──stamp reaches zero──> acked      (a tombstone until purge_at)
    pending ──fail()──────────────> failed     (a tombstone until purge_at)
    pending ──deadline + skew passes──> reads as expired (stored pending; replay it)

A stamp or touch is refused once the deadline has passed on the writer's clock; a reader
declares the chain ``expired`` (and a create may overwrite it) only once the deadline
plus the ``skew`` margin has passed on the reader's clock. With clocks that disagree by
less than ``skew``, no writer can still stamp a chain that some reader has declared
expired. A sum-mode chain whose sum is zero reads ``acked`` even if the follow-up write
that stores the state was lost.

Op ids. Every create and stamp carries an op, remembered in the chain with a hash of its
payload: a create's op for the chain's whole life (``create_op``), a stamp's in the
bounded list ``ops`` (the most recent ``window`` of them, the window stored in the chain
itself, so a writer configured with a smaller one cannot shrink it). An op found there
is a duplicate: it is not applied again, and the caller gets the chain's current value,
or :class:`OpIdReused` if the payload differs. The guarantee: a duplicate is caught
while fewer than ``window`` other ops have landed on the chain since the original.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import (
    BufferLengthsUnequal,
    ChainModeMismatch,
    InvalidConfig,
    NotOwner,
    OpIdReused,
    TagAcked,
    TagExists,
    TagExpired,
    TagFailed,
    TagNotFound,
    XorAckError,
)
from ..stamps import Stamp, Sum
from ..status import ChainStatus, State, epoch_to_datetime
from .algebra import Algebra, Mode, Value, XorAlgebra, wrap
from .chain import Chain, Op, check_window, new_token, random_op

__all__ = [
    "ChainRules",
    "Verdict",
    "Apply",
    "Duplicate",
    "Reject",
    "Unchanged",
    "Plan",
    "APPLY",
    "DEFERRED",
    "MAX_TRIM",
]


@dataclass(frozen=True, slots=True)
class Apply:
    """The call may be written."""


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The op was already applied: nothing to write; ``result`` is what the call returns."""

    result: Stamp | Sum


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Nothing to write, and no error: the chain is already as the call would leave it
    (failing a failed chain)."""


@dataclass(frozen=True, slots=True)
class Reject:
    """The call is refused with ``error``; nothing is written."""

    error: XorAckError


APPLY = Apply()
Verdict = Apply | Duplicate | Unchanged | Reject

#: The most ops one trim removes. A trim names two paths per op in one ``REMOVE``:
#: DynamoDB refuses expressions over 4 KB (a trim of about 190 ops, measured on DynamoDB
#: Local), and moto's expression parser overflows Python's stack at about 70. A list
#: that fell further behind (lost trims, a burst of writers) shrinks by up to this many
#: at each threshold crossed (every ``slack`` stamps) until it is back within bounds.
MAX_TRIM = 50


class _Deferred:
    """A combined stamp left for the next write (the window would not hold it)."""

    def __repr__(self) -> str:
        return "DEFERRED"


DEFERRED = _Deferred()
Outcome = Stamp | Sum | XorAckError | _Deferred


@dataclass(slots=True)
class Plan:
    """Stamps replayed in order on one value of a chain, as one ``stamp()`` after
    another would decide each: ``new`` is the chain to write (None when nothing
    applies), ``outcomes`` what each stamp returns or raises."""

    new: Chain | None
    outcomes: list[Outcome] = field(default_factory=list)
    duplicates: int = 0


@dataclass(frozen=True, slots=True)
class ChainRules:
    """The rule parameters of one tracker. Picklable.

    :param algebra: xor or sum (:mod:`.algebra`).
    :param ttl: seconds a new or touched chain may stay pending; None for chains that
        never time out by the clock (``MemoryAck``'s default: it expires by rotation).
    :param retention: seconds an ``acked``/``failed`` tombstone, or an expired chain,
        stays readable before its item may be purged (the TTL attribute).
    :param skew: the clock-skew margin in seconds (see the module doc).
    :param window: op ids remembered by chains this tracker creates (and by chains that
        carry no window of their own, such as the Node package's).
    :param slack: sum mode appends op ids without reading; the list is trimmed back to
        its window once it holds ``window + slack`` (one extra write per ``slack``
        stamps).
    :param delete_on_ack: delete a chain once it completes (the Node package's habit),
        after first storing it as an ``acked`` tombstone so that the completing stamp's
        outcome is never lost.
    """

    algebra: Algebra = field(default_factory=XorAlgebra)
    ttl: int | None = 3600
    retention: int = 86400
    skew: int = 5
    window: int = 32
    slack: int = 20
    delete_on_ack: bool = False

    def __post_init__(self) -> None:
        check_window(self.window)
        if self.ttl is not None and not self.ttl >= 1:
            raise InvalidConfig("ttl must be at least one second")
        if not self.retention >= 1:
            raise InvalidConfig("retention must be at least one second")
        if not 0 <= self.skew <= 3600:
            raise InvalidConfig(f"skew must be 0 to 3600 seconds, got {self.skew!r}")
        if not 1 <= self.slack <= 1000:
            raise InvalidConfig(f"slack must be 1 to 1000, got {self.slack!r}")

    @property
    def mode(self) -> Mode:
        return self.algebra.mode

    def _purge(self, now: int) -> int | None:
        """When a chain finishing now may be purged (None without a clock ttl: such
        chains, ``MemoryAck``'s, are purged by rotation)."""
        return None if self.ttl is None else now + self.retention

    # -- reading ------------------------------------------------------------------------

    def window_of(self, chain: Chain) -> int:
        return chain.window if chain.window is not None else self.window

    def effective_state(self, chain: Chain, now: int) -> State:
        """The state a reader sees at ``now`` (see the module doc)."""
        if chain.state != "pending":
            return chain.state
        if _is_zero(chain.value):
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
            value=wrap(chain.value, acked=state == "acked"),
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
            return TagFailed(
                f"chain {chain.tag!r} has failed" + (f": {chain.reason}" if chain.reason else ""),
                tag=chain.tag,
                reason=chain.reason,
            )
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

    def judge_create(self, chain: Chain, op: Op, now: int) -> Verdict:
        """A create that found ``chain`` under its tag.

        The create's own op is checked first, for the chain's whole life: a create that
        is delivered again (botocore's resend, a retried task, a redelivered message)
        returns the chain as it is, even when it has expired since, rather than
        reviving it as a new pending chain with an empty history.
        """
        if chain.create_op is not None and chain.create_op.key == op.key:
            if not chain.create_op.same_payload(op):
                return Reject(
                    OpIdReused(
                        f"create op id reused on chain {chain.tag!r} with another value", tag=chain.tag
                    )
                )
            return Duplicate(wrap(chain.value, acked=False, duplicate=True))
        if self.overwritable(chain, now):
            return APPLY
        return Reject(
            TagExists(
                f"chain {chain.tag!r} already exists ({self.effective_state(chain, now)})", tag=chain.tag
            )
        )

    # -- stamp --------------------------------------------------------------------------

    def judge_stamp(
        self, tag: str, chain: Chain | None, delta: Value, op: Op, owner: str | None, now: int
    ) -> Verdict:
        """A stamp on ``chain`` as it stands: duplicate, refused, or to be applied.

        Order matters: a known op is a duplicate whatever has happened to the chain
        since (a redelivery after completion is not an error), and its ``acked`` is True
        only for the op that completed the chain (the last op of a completed chain), so
        that exactly one caller ever sees ``acked``.
        """
        if chain is None:
            return Reject(TagNotFound(f"chain {tag!r} does not exist", tag=tag))
        if chain.mode != self.mode:
            return Reject(
                ChainModeMismatch(
                    f"chain {chain.tag!r} is a {chain.mode}-mode chain; this tracker is in {self.mode} mode",
                    tag=chain.tag,
                )
            )
        seen = chain.find(op.key)
        if seen is not None:
            if not seen.same_payload(op):
                return Reject(
                    OpIdReused(f"op id reused on chain {chain.tag!r} with a different stamp", tag=chain.tag)
                )
            completed = self.effective_state(chain, now) == "acked" and chain.ops[-1].key == op.key
            return Duplicate(wrap(chain.value, acked=completed, duplicate=True))
        refusal = self._owner_refusal(chain, owner) or self._refusal(chain, now)
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

    def stamped(self, chain: Chain, delta: Value, ops: tuple[Op, ...], now: int) -> Chain:
        """``chain`` after a read-modify-write that applies ``delta`` with ``ops``: the
        op list trimmed to the chain's window at once, an ``acked`` tombstone if the
        value reached zero."""
        value = self.algebra.combine(chain.value, delta)
        window = self.window_of(chain)
        done = _is_zero(value)
        evicted = max(0, len(chain.ops) + len(ops) - window)
        return replace(
            chain,
            # Over a foreign item (no history) a new lineage starts: a writer whose
            # earlier write's outcome is unknown can then tell the history was reset.
            create_op=random_op() if chain.foreign else chain.create_op,
            value=value,
            ops=(chain.ops + ops)[-window:],
            seq=chain.seq + len(ops),
            # Ops this write drops count as trimmed (a sum-mode writer's lost-response
            # check relies on it).
            cut_seq=chain.cut_seq + evicted,
            cut_at=now if evicted else chain.cut_at,
            window=window,
            version=chain.version + 1,
            token=new_token(),
            updated_at=now,
            state="acked" if done else chain.state,
            purge_at=self._purge(now) if done else chain.purge_at,
        )

    def plan(
        self,
        chain: Chain,
        stamps: list[tuple[Value, Op, str | None]],
        now: int,
        marker: Op | None = None,
    ) -> Plan:
        """Replay ``stamps`` (delta, op, owner) in order on ``chain``, as one
        ``stamp()`` after another would: each applied stamp's outcome is the value after
        it; a duplicate (in the chain, or twice in the batch) returns the value at its
        turn; a stamp after the batch completed the chain gets :class:`TagAcked`.

        ``marker`` (a random op) goes first in the written op list when given, so that a
        writer that lost the response of a combined write can tell it landed, whatever
        other writers did. At most ``window - 1`` stamps are applied in one write (the
        rest are :data:`DEFERRED`), so a write never pushes its own ops out of the window.
        """
        out = Plan(new=None)
        current = chain
        applied: list[Op] = []
        total: Value | None = None
        cap = self.window_of(chain) - (1 if marker is not None else 0)
        for delta, op, owner in stamps:
            if len(applied) >= max(1, cap):
                out.outcomes.append(DEFERRED)
                continue
            verdict = self.judge_stamp(chain.tag, current, delta, op, owner, now)
            if isinstance(verdict, Duplicate):
                out.duplicates += 1
                out.outcomes.append(verdict.result)
            elif isinstance(verdict, Reject):
                out.outcomes.append(verdict.error)
            else:
                value = self.algebra.combine(current.value, delta)
                done = _is_zero(value)
                applied.append(op)
                total = delta if total is None else self.algebra.combine(total, delta)
                current = replace(
                    current, value=value, ops=current.ops + (op,), state="acked" if done else "pending"
                )
                out.outcomes.append(wrap(value, acked=done))
        if total is not None:
            ops = ((marker,) if marker is not None and len(stamps) > 1 else ()) + tuple(applied)
            out.new = self.stamped(chain, total, ops, now)
        return out

    # -- sum mode: blind writes ----------------------------------------------------------

    def add_allowed(
        self,
        chain: Chain | None,
        op: Op,
        owner: str | None,
        now: int,
        since: int | None = None,
        after_seq: int | None = None,
    ) -> bool:
        """The condition of a sum-mode stamp (one atomic ``ADD``, no read). As a
        DynamoDB ConditionExpression: ``attribute_exists(sum) AND state = pending AND
        sum <> 0 AND (attribute_not_exists(deadline) OR deadline >= :now) AND NOT
        contains(ops, :op) [AND owner = :owner]``, and on a retry after a lost response
        ``AND (attribute_not_exists(cutn) OR cutn <= :after_seq)`` or ``AND
        (attribute_not_exists(cut) OR cut < :since)`` (see :meth:`uncut`)."""
        return (
            self.uncut(chain, since, after_seq)
            and chain is not None
            and chain.mode == "sum"
            and chain.state == "pending"
            and not _is_zero(chain.value)
            and (chain.deadline is None or chain.deadline >= now)
            and chain.find(op.key) is None
            and (owner is None or chain.owner == owner)
        )

    def added(self, chain: Chain, delta: Value, op: Op, now: int) -> Chain:
        """``chain`` after a sum-mode stamp: ``ADD sum :delta``, the op appended (not
        trimmed), a new token. The state is left pending: the writer that sees zero
        stores ``acked`` next (:meth:`completed`)."""
        return replace(
            chain,
            value=self.algebra.combine(chain.value, delta),
            ops=chain.ops + (op,),
            seq=chain.seq + 1,
            version=chain.version + 1,
            token=new_token(),
            updated_at=now,
        )

    def completed(self, chain: Chain, now: int) -> Chain:
        """``chain`` (whose value is zero) stored as an ``acked`` tombstone."""
        return replace(
            chain,
            state="acked",
            purge_at=self._purge(now),
            version=chain.version + 1,
            token=new_token(),
            updated_at=now,
        )

    def trim_count(self, chain: Chain, added: int) -> int:
        """How many of the oldest ops the writer that just appended ``added`` of them
        should remove: all past the window (at most :data:`MAX_TRIM`), when its append
        crossed a multiple of ``slack`` beyond it (exactly one writer crosses each; a
        lost trim is made up at the next multiple). 0 when no trim is due."""
        window, n = self.window_of(chain), len(chain.ops)
        if n < window + self.slack:
            return 0
        if (n - window) // self.slack > (n - added - window) // self.slack:
            return min(n - window, MAX_TRIM)
        return 0

    def trim_allowed(self, chain: Chain | None, count: int, window: int) -> bool:
        """A trim's condition: the list still holds ``count`` ops beyond ``window``
        (``size(ops) >= :n``), so removing the ``count`` oldest keeps at least the
        ``window`` most recent, whatever other trims (or a resend of this one) landed
        first. Trims that raced each other all apply while there is enough to remove;
        none ever cuts into the window."""
        return chain is not None and len(chain.ops) >= count + window

    @staticmethod
    def uncut(chain: Chain | None, since: int | None, after_seq: int | None) -> bool:
        """Whether every op that landed after a moment is still in ``chain``'s list:
        trims removed no op appended after position ``after_seq`` (exact, when the
        writer knew a lower bound of the chain's ``seq`` at that moment), or no trim ran
        at or after time ``since`` (the fallback, which the clock-skew margin makes
        conservative)."""
        if chain is None:
            return True
        if after_seq is not None:
            return chain.cut_seq <= after_seq
        return since is None or chain.cut_at is None or chain.cut_at < since

    def trimmed(self, chain: Chain, count: int, now: int = 0) -> Chain:
        """``chain`` without its ``count`` oldest ops, noting when (``cut_at``). The token
        is kept: a trim changes no value or state, and a read-modify-write that was based
        on the untrimmed list may still write it back (a longer list only widens the
        window)."""
        return replace(
            chain, ops=chain.ops[count:], trims=chain.trims + 1, cut_at=now, cut_seq=chain.cut_seq + count
        )

    # -- fail, touch ----------------------------------------------------------------------

    def judge_fail(self, tag: str, chain: Chain | None, owner: str | None, now: int) -> Verdict:
        """``fail()`` on ``chain``: a pending or expired chain fails; a failed one is
        left as it is (its first reason stays); an acked one refuses."""
        if chain is None:
            return Reject(TagNotFound(f"chain {tag!r} does not exist", tag=tag))
        refusal = self._owner_refusal(chain, owner)
        if refusal is not None:
            return Reject(refusal)
        state = self.effective_state(chain, now)
        if state == "acked":
            return Reject(TagAcked(f"chain {chain.tag!r} is already acked", tag=chain.tag))
        if state == "failed":
            return Unchanged()
        return APPLY

    def fail_allowed(self, chain: Chain | None, owner: str | None) -> bool:
        """A blind fail's condition: ``attribute_exists(pk) AND (attribute_not_exists(state)
        OR state = pending) AND (attribute_not_exists(sum) OR sum <> 0) [AND owner =
        :owner]``."""
        return (
            chain is not None
            and chain.state == "pending"
            and not (chain.mode == "sum" and _is_zero(chain.value))
            and (owner is None or chain.owner == owner)
        )

    def failed(self, chain: Chain, reason: str | None, now: int) -> Chain:
        return replace(
            chain,
            state="failed",
            reason=reason if reason else chain.reason,
            purge_at=self._purge(now),
            version=chain.version + 1,
            token=new_token(),
            updated_at=now,
        )

    def judge_touch(self, tag: str, chain: Chain | None, owner: str | None, now: int) -> Verdict:
        """``touch()`` on ``chain``: only a pending chain whose deadline has not passed
        is extended; an expired one is not revived (replay it)."""
        if chain is None:
            return Reject(TagNotFound(f"chain {tag!r} does not exist", tag=tag))
        refusal = self._owner_refusal(chain, owner) or self._refusal(chain, now)
        return Reject(refusal) if refusal is not None else APPLY

    def touch_allowed(self, chain: Chain | None, owner: str | None, now: int) -> bool:
        """A blind touch's condition: ``attribute_exists(pk) AND (attribute_not_exists(state)
        OR state = pending) AND (attribute_not_exists(sum) OR sum <> 0) AND
        (attribute_not_exists(deadline) OR deadline >= :now) [AND owner = :owner]``."""
        return (
            self.fail_allowed(chain, owner)
            and chain is not None
            and (chain.deadline is None or chain.deadline >= now)
        )

    def touched(self, chain: Chain, ttl: int | None, now: int) -> Chain:
        """``chain`` with its deadline ``ttl`` from now (unchanged for None: a chain
        that expires by rotation only)."""
        deadline = chain.deadline if ttl is None else now + ttl
        return replace(
            chain,
            deadline=deadline,
            purge_at=chain.purge_at if deadline is None else deadline + self.skew + self.retention,
            version=chain.version + 1,
            token=new_token(),
            updated_at=now,
        )


def _is_zero(value: Value) -> bool:
    return not any(value) if isinstance(value, bytes) else value == 0
