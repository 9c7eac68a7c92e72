"""Turning a tracker method's arguments into a call, after checking every one of them:
every tracker builds its calls here, so bad input gets the same typed error everywhere,
before any request is sent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from ..errors import InvalidConfig, InvalidStamp, ZeroBufferNoOp
from ..stamps import Position, check_tag
from .algebra import EdgeLike, Value, is_zero
from .calls import CreateCall, DeleteCall, FailCall, StatusCall, TouchCall
from .chain import Chain, make_op
from .history import START, BlockCache
from .rules import ChainRules
from .stamping import AddCall, StampCall

#: The longest failure reason accepted, in characters; a longer one is refused
#: (:class:`InvalidConfig`), never cut silently: :func:`fit_reason` shortens one visibly.
MAX_REASON = 1024
#: The longest owner name accepted.
MAX_OWNER = 256
#: The longest ``ttl`` or ``retention`` accepted: 100 years, in seconds. Every epoch the
#: library writes then stays within ``datetime``'s year 9999 for any clock before 9699.
MAX_DURATION = 36_525 * 86_400
#: The largest clock-skew margin accepted, in seconds.
MAX_SKEW = 3600


def seconds(value: object, name: str) -> int:
    """A duration (``timedelta`` or seconds) as whole seconds, from 1 to
    :data:`MAX_DURATION`. Raises :class:`InvalidConfig` for anything else (a value that is
    not a number, zero or less, NaN, infinite, or over 100 years)."""
    total: float
    if isinstance(value, timedelta):
        total = value.total_seconds()
    elif isinstance(value, int) and not isinstance(value, bool):
        if not 0 < value <= MAX_DURATION:  # compared as an int: float(10**400) overflows
            raise InvalidConfig(_duration_message(name, value))
        return value
    elif isinstance(value, float):
        total = value
    else:
        raise InvalidConfig(f"{name} must be a timedelta or a number of seconds, got {value!r}")
    if not (math.isfinite(total) and 0 < total <= MAX_DURATION):
        raise InvalidConfig(_duration_message(name, value))
    return max(1, round(total))


def _duration_message(name: str, value: object) -> str:
    return f"{name} must be more than 0 and at most {MAX_DURATION} seconds (100 years), got {value!r}"


def skew_seconds(value: object) -> int:
    """The clock-skew margin as whole seconds, 0 to :data:`MAX_SKEW`; :class:`InvalidConfig` else."""
    total = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not 0 <= total <= MAX_SKEW:
        raise InvalidConfig(f"skew must be 0 to {MAX_SKEW} seconds, got {value!r}")
    return round(total)


def _text(value: str, name: str, tag: str | None) -> str:
    """``value`` if it encodes to UTF-8 (a lone surrogate does not, and DynamoDB stores
    UTF-8), else :class:`InvalidConfig`."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidConfig(f"{name} is not valid Unicode (a lone surrogate?): {value!r}", tag=tag) from None
    return value


def fit_reason(reason: str) -> str:
    """``reason`` as ``fail()`` accepts it: unchanged when it has at most
    :data:`MAX_REASON` characters, else its start and a note of how long it was (for
    reasons built from arbitrary text, such as an exception's ``repr``)."""
    if len(reason) <= MAX_REASON:
        return reason
    note = f" ... [{len(reason)} characters, cut]"
    return reason[: MAX_REASON - len(note)] + note


def chain_pairs(chains: object) -> list[tuple[object, object]]:
    """``create_many``'s chains as (tag, value) pairs, from a mapping tag -> value or an
    iterable of pairs, in order (unchecked: each create checks its own). Raises
    :class:`InvalidConfig` for anything else."""
    if isinstance(chains, Mapping):
        return list(chains.items())
    what = "create_many() takes a mapping tag -> value, or (tag, value) pairs"
    if isinstance(chains, (str, bytes, bytearray, memoryview)) or not isinstance(chains, Iterable):
        raise InvalidConfig(f"{what}, got {type(chains).__name__}")
    pairs: list[tuple[object, object]] = []
    for pair in chains:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidConfig(f"{what}, got an item {pair!r:.80}")
        pairs.append((pair[0], pair[1]))
    return pairs


def _owner(owner: object) -> str | None:
    if owner is None:
        return None
    if not isinstance(owner, str) or not 1 <= len(owner) <= MAX_OWNER:
        raise InvalidConfig(f"owner must be a str of 1 to {MAX_OWNER} characters, got {owner!r:.300}")
    return _text(owner, "owner", None)


def _reason(reason: object, tag: str) -> str | None:
    """A failure reason, checked: None or a str of at most :data:`MAX_REASON` characters
    (an empty one is None)."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise InvalidConfig(f"reason must be a str, got {type(reason).__name__}", tag=tag)
    if len(reason) > MAX_REASON:
        raise InvalidConfig(
            f"reason has {len(reason)} characters; at most {MAX_REASON} are accepted "
            "(fit_reason() shortens one, saying so)",
            tag=tag,
        )
    return _text(reason, "reason", tag) or None


def _after(op_id: str | None, after: object) -> Position | None:
    """``after`` checked, else :data:`~.history.START`; None when the library draws the
    op id (no earlier copy exists)."""
    if after is not None and not isinstance(after, Position):
        raise InvalidConfig(f"after must be a Position (a result's .position), got {type(after).__name__}")
    return None if op_id is None else after or START


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
        checked_after = _after(op_id, after)
        if self.rules.mode == "sum":
            return AddCall(self.rules, tag, delta, op, checked_owner, known, checked_after, self.history)
        return StampCall(self.rules, tag, [(delta, op, checked_owner, checked_after)], known, self.history)

    def batch_stamp(self, spec: StampSpec, known: Chain | None = None) -> StampCall:
        """A stamp of a batch: a read-modify-write in either mode (a transaction returns
        no values, so a blind ADD could not be in one)."""
        if not isinstance(spec, StampSpec):
            raise InvalidConfig(f"stamp_many() takes StampSpec values, got {type(spec).__name__}")
        tag = check_tag(spec.tag)
        delta = self.rules.algebra.delta(spec.value, spec.finished, spec.started, tag)
        op = make_op(spec.op_id, "stamp", self.rules.algebra.payload(delta))
        item = (delta, op, _owner(spec.owner), _after(spec.op_id, spec.after))
        return StampCall(self.rules, tag, [item], known, self.history)

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
        return FailCall(self.rules, tag, _reason(reason, tag), _owner(owner))

    def touch(self, tag: object, ttl: timedelta | float | None, owner: object) -> TouchCall:
        tag = check_tag(tag)
        return TouchCall(
            self.rules, tag, self.rules.ttl if ttl is None else seconds(ttl, "ttl"), _owner(owner)
        )

    def status(self, tag: object) -> StatusCall:
        return StatusCall(self.rules, check_tag(tag))

    def delete(self, tag: object) -> DeleteCall:
        return DeleteCall(self.rules, check_tag(tag))
