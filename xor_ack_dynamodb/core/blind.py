"""The sum mode's blind writes, and the other updates a store applies without the
caller reading first: the predicates a store evaluates as a write's condition (a
DynamoDB ConditionExpression; the memory store calls them) and the chains they leave.
Mixed into :class:`~.rules.ChainRules`."""

from __future__ import annotations

from dataclasses import replace

from ..stamps import Position
from .algebra import Algebra, Value, is_zero
from .chain import Chain, Op, updated
from .history import guard
from .messages import Trim

__all__ = ["BlindWrites"]


class BlindWrites:
    """The blind-write rules of :class:`~.rules.ChainRules`."""

    __slots__ = ()
    algebra: Algebra

    def _purge(self, now: int) -> int | None:
        raise NotImplementedError

    def add_allowed(
        self,
        chain: Chain | None,
        op: Op,
        owner: str | None,
        now: int,
        after: Position | None = None,
    ) -> bool:
        """The condition of a sum-mode stamp (one atomic ``ADD``, no read). As a
        DynamoDB ConditionExpression: ``attribute_exists(sum) AND state = pending AND
        sum <> 0 AND (attribute_not_exists(deadline) OR deadline >= :now) AND NOT
        contains(ops, :op) [AND owner = :owner]``, and with ``after`` the guard
        :meth:`covers`."""
        return (
            self.touch_allowed(chain, owner, now)
            and chain is not None
            and chain.mode == "sum"
            and self.covers(chain, after)
            and chain.find(op.key) is None
        )

    def fail_allowed(self, chain: Chain | None, owner: str | None) -> bool:
        """A blind fail's condition: ``attribute_exists(pk) AND (attribute_not_exists(state)
        OR state = pending) AND (attribute_not_exists(sum) OR sum <> 0) [AND owner =
        :owner]``."""
        return (
            chain is not None
            and chain.state == "pending"
            and not (chain.mode == "sum" and is_zero(chain.value))
            and (owner is None or chain.owner == owner)
        )

    def touch_allowed(self, chain: Chain | None, owner: str | None, now: int) -> bool:
        """A blind touch's condition: ``attribute_exists(pk) AND (attribute_not_exists(state)
        OR state = pending) AND (attribute_not_exists(sum) OR sum <> 0) AND
        (attribute_not_exists(deadline) OR deadline >= :now) [AND owner = :owner]``."""
        return self.fail_allowed(chain, owner) and self.before_deadline(chain, now)

    @staticmethod
    def before_deadline(chain: Chain | None, now: int) -> bool:
        """The deadline test of every write that keeps a chain going (a stamp's ``Put``
        and ``ADD``, a touch): ``attribute_not_exists(deadline) OR deadline >= :now``,
        ``now`` being the writer's clock as the request is sent. A missing chain passes
        it (the rest of the condition decides)."""
        return chain is None or chain.deadline is None or chain.deadline >= now

    @staticmethod
    def covers(chain: Chain | None, after: Position | None) -> bool:
        """Whether ``chain`` passes the guard of a write whose op is known absent up to
        ``after`` (:func:`~.history.guard`; None: no guard). As a ConditionExpression:
        ``(attribute_not_exists(cutn) OR cutn <= :after_seq)`` and ``lin =
        :after_lineage`` (``attribute_not_exists(lin)`` for an empty lineage)."""
        if chain is None or after is None:
            return True
        seq, lineage = guard(after)
        return (lineage is None or chain.position.lineage == lineage) and chain.cut_seq <= seq

    def added(self, chain: Chain, delta: Value, op: Op, now: int) -> Chain:
        """``chain`` after a sum-mode stamp: ``ADD sum :delta``, the op appended (not
        trimmed), a new token. The state is left pending: the writer that sees zero
        stores ``acked`` next (:meth:`completed`)."""
        value = self.algebra.combine(chain.value, delta)
        return updated(chain, now, value=value, ops=chain.ops + (op,), seq=chain.seq + 1)

    def completed(self, chain: Chain, now: int) -> Chain:
        """``chain`` (whose value is zero) stored as an ``acked`` tombstone."""
        return updated(chain, now, state="acked", purge_at=self._purge(now))

    def trim_allowed(self, chain: Chain | None, trim: Trim) -> bool:
        """A trim's condition: the list still starts at position ``trim.cut + 1`` on the
        trim's lineage (``cutn = :cut AND lin = :lineage``), and holds ``count`` ops beyond
        the window (``size(ops) >= :n``). Each block has one place, so trims that race
        (or a resend) apply once."""
        if chain is None or chain.cut_seq != trim.cut or len(chain.ops) < trim.count + trim.window:
            return False
        return chain.position.lineage == trim.lineage

    def trimmed(self, chain: Chain, trim: Trim) -> Chain:
        """``chain`` without its ``count`` oldest ops. The token is kept: a trim changes
        no value or state, and a read-modify-write that was based on the untrimmed list
        may still write it back (its ops are then in the window and the history both)."""
        return replace(chain, ops=chain.ops[trim.count :], cut_seq=chain.cut_seq + trim.count)
