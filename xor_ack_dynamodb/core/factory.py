"""Turning a tracker method's arguments into a call, after checking every one of them.

Every tracker (``XorAckDynamoDB``, ``MemoryAck``, the asyncio tracker) builds its calls
here, so bad input gets the same typed error everywhere, before any request is sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from ..errors import InvalidConfig, InvalidStamp, ZeroBufferNoOp
from ..stamps import Position, check_tag
from .algebra import EdgeLike, Value, is_zero
from .calls import CreateCall, DeleteCall, FailCall, StatusCall, TouchCall
from .chain import Chain, make_op
from .history import BlockCache, Delivery
from .rules import ChainRules
from .stamping import AddCall, StampCall

__all__ = ["CallFactory", "StampSpec", "seconds", "skew_seconds", "MAX_REASON", "MAX_OWNER"]

#: A failure reason is kept to this many characters.
MAX_REASON = 1024
#: The longest owner name accepted.
MAX_OWNER = 256


def seconds(value: object, name: str) -> int:
    """A duration (``timedelta`` or seconds) as whole seconds, at least 1. Raises
    :class:`InvalidConfig` for anything else."""
    if isinstance(value, timedelta):
        total = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        total = float(value)
    else:
        raise InvalidConfig(f"{name} must be a timedelta or a number of seconds, got {value!r}")
    if not total > 0:
        raise InvalidConfig(f"{name} must be positive, got {value!r}")
    return max(1, round(total))


def skew_seconds(value: object) -> int:
    """The clock-skew margin as whole seconds, 0 to 3600; :class:`InvalidConfig` else."""
    total = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not 0 <= total <= 3600:
        raise InvalidConfig(f"skew must be 0 to 3600 seconds, got {value!r}")
    return round(total)


def _owner(owner: object) -> str | None:
    if owner is None:
        return None
    if not isinstance(owner, str) or not 1 <= len(owner) <= MAX_OWNER:
        raise InvalidConfig(f"owner must be a str of 1 to {MAX_OWNER} characters, got {owner!r}")
    return owner


def _delivery(op_id: str | None, after: object) -> Delivery:
    """Where earlier copies of a stamp's op can have landed (see ``stamp()``), checked:
    after ``after``, else anywhere in the lineage; none when the library draws the op
    id (no ``op_id``)."""
    if after is not None and not isinstance(after, Position):
        raise InvalidConfig(f"after must be a Position (a result's .position), got {type(after).__name__}")
    return Delivery(after, drawn=op_id is None)


@dataclass(frozen=True, slots=True)
class StampSpec:
    """One stamp of a batch (``stamp_many``): the arguments of ``stamp()``."""

    tag: str
    value: EdgeLike | None = None
    finished: tuple[EdgeLike, ...] = ()
    started: tuple[EdgeLike, ...] = ()
    op_id: str | None = None
    owner: str | None = None
    after: Position | None = None


@dataclass(frozen=True, slots=True)
class CallFactory:
    """Builds the calls of one tracker from checked arguments. ``history``: the
    tracker's cache of history blocks, shared by its stamps."""

    rules: ChainRules
    history: BlockCache | None = None

    def create(
        self, tag: object, value: object, op_id: str | None, owner: object, replace_expired: object = True
    ) -> CreateCall:
        tag = check_tag(tag)
        checked: Value = self.rules.algebra.value(value, tag)
        if is_zero(checked):
            raise ZeroBufferNoOp("cannot create a chain with a zero value (it would be complete)", tag=tag)
        if isinstance(checked, int) and checked < 0:  # as stamp() refuses a negative edge
            raise InvalidStamp(
                f"a sum-mode chain starts from the sum of its starting edges, a positive int; got {checked}",
                tag=tag,
            )
        if op_id is not None and self.rules.delete_on_ack:
            raise InvalidConfig(
                "create(op_id=...) needs tombstones: with delete_on_ack a finished chain leaves no "
                "trace, so a redelivered create would start a new live chain. Keep tombstones "
                "(delete_on_ack=False) for idempotent creates",
                tag=tag,
            )
        if not isinstance(replace_expired, bool):
            raise InvalidConfig(f"replace_expired must be a bool, got {replace_expired!r}", tag=tag)
        op = make_op(op_id, "create", self.rules.algebra.payload(checked))
        return CreateCall(self.rules, tag, checked, op, _owner(owner), replace_expired)

    def stamp(
        self,
        tag: object,
        value: EdgeLike | None,
        finished: Iterable[EdgeLike],
        started: Iterable[EdgeLike],
        op_id: str | None,
        owner: object,
        known: Chain | None = None,
        after: object = None,
    ) -> StampCall | AddCall:
        tag = check_tag(tag)
        delta = self.rules.algebra.delta(value, finished, started, tag)
        op = make_op(op_id, "stamp", self.rules.algebra.payload(delta))
        checked_owner = _owner(owner)
        delivery = _delivery(op_id, after)
        if self.rules.mode == "sum":
            return AddCall(self.rules, tag, delta, op, checked_owner, known, delivery, self.history)
        return StampCall(self.rules, tag, [(delta, op, checked_owner, delivery)], known, self.history)

    def batch_stamp(self, spec: StampSpec, known: Chain | None = None) -> StampCall:
        """A stamp of a batch: a read-modify-write in either mode (written in a
        transaction with the batch's others, where the sum mode's blind ADD could not
        be, since a transaction returns no values)."""
        if not isinstance(spec, StampSpec):
            raise InvalidConfig(f"stamp_many() takes StampSpec values, got {type(spec).__name__}")
        tag = check_tag(spec.tag)
        delta = self.rules.algebra.delta(spec.value, spec.finished, spec.started, tag)
        op = make_op(spec.op_id, "stamp", self.rules.algebra.payload(delta))
        delivery = _delivery(spec.op_id, spec.after)
        return StampCall(self.rules, tag, [(delta, op, _owner(spec.owner), delivery)], known, self.history)

    @staticmethod
    def distinct(tags: list[str]) -> None:
        """Raise :class:`InvalidConfig` if a batch names a chain twice."""
        seen: set[str] = set()
        for tag in tags:
            if tag in seen:
                raise InvalidConfig(f"a batch names chain {tag!r} twice: one call per chain", tag=tag)
            seen.add(tag)

    def fail(self, tag: object, reason: object, owner: object) -> FailCall:
        tag = check_tag(tag)
        if reason is not None and not isinstance(reason, str):
            raise InvalidConfig(f"reason must be a str, got {type(reason).__name__}", tag=tag)
        return FailCall(self.rules, tag, reason[:MAX_REASON] if reason else None, _owner(owner))

    def touch(self, tag: object, ttl: timedelta | float | None, owner: object) -> TouchCall:
        tag = check_tag(tag)
        return TouchCall(
            self.rules, tag, self.rules.ttl if ttl is None else seconds(ttl, "ttl"), _owner(owner)
        )

    def status(self, tag: object) -> StatusCall:
        return StatusCall(self.rules, check_tag(tag))

    def delete(self, tag: object) -> DeleteCall:
        return DeleteCall(self.rules, check_tag(tag))
